// The platform canvas's downloadChatFile (its uploads.ts, as PLATFORM.md
// describes it) with README's drop-in ("Opening attachments"): the
// platform-pending: branch opens the file through the client's openFile,
// the browser's own download manager; the canvas's other branches
// (container paths through the platform's /chat/download, http(s) in a
// new tab) stay as they are. platformAuthHeaders() and PLATFORM_URL are
// the canvas's. The harness functions below it are the test's.
import { openFile, downloadFile, pendingFile } from "@pendinguploads/client";

// ---- the canvas ----

let PLATFORM_URL = "";
let tenantSlug = "";
let devToken = "";

function platformAuthHeaders() {
  const h = {};
  if (tenantSlug) h["X-Molecule-Org-Slug"] = tenantSlug;
  if (devToken) h.Authorization = `Bearer ${devToken}`;
  return h;
}

// downloadChatFile is README's drop-in body, as written there.
export async function downloadChatFile(workspaceId, attachment) {
  const pending = pendingFile(attachment.uri);
  if (pending) {
    // A download link, opened by the browser itself: streamed to disk
    // with its progress and resume, never held in the page.
    await openFile(PLATFORM_URL, null, pending.workspaceId, pending.fileId, {
      headers: platformAuthHeaders,
      credentials: "include",
    });
    return;
  }
  if (/^https?:\/\//.test(attachment.uri)) {
    window.open(attachment.uri, "_blank", "noopener,noreferrer");
    return;
  }
  // A container path: the platform's own route, as before.
  const href = `${PLATFORM_URL}/workspaces/${workspaceId}/chat/download?path=${encodeURIComponent(attachment.uri)}`;
  const res = await fetch(href, { headers: platformAuthHeaders(), credentials: "include", signal: AbortSignal.timeout(60_000) });
  if (res.status >= 400) throw new Error(`download failed: ${res.status}`);
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = attachment.name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 30_000);
}

// ---- the test's harness ----

// open is one click on an attachment in the chat history.
export async function open({ api, slug, token, ws, attachment }) {
  PLATFORM_URL = api || "";
  tenantSlug = slug || "";
  devToken = token || "";
  try {
    await downloadChatFile(ws, attachment);
    return { ok: true, href: location.href };
  } catch (e) {
    return { ok: false, error: { name: e && e.name, code: e && e.code, status: e && e.status, message: e && e.message } };
  }
}

// readWhole is the client's downloadFile, the bytes in the page (for a
// page that reads them), with the test's stall limit.
export async function readWhole({ api, token, ws, fileId, stallTimeoutMs }) {
  try {
    const d = await downloadFile(api || "", token || null, ws, fileId, { headers: platformAuthHeaders, credentials: "include", stallTimeoutMs });
    return { ok: true, size: d.size, sha256: d.sha256 };
  } catch (e) {
    return { ok: false, error: { name: e && e.name, code: e && e.code, message: e && e.message } };
  }
}

// legacy is the canvas's download as it was (a fetch with a fixed minute,
// the whole answer as a blob, an object URL clicked): the comparison.
export async function legacy({ api, slug, ws, fileId, name }) {
  PLATFORM_URL = api || "";
  tenantSlug = slug || "";
  try {
    const res = await fetch(`${PLATFORM_URL}/workspaces/${ws}/pending-uploads/${fileId}/content`, {
      headers: platformAuthHeaders(),
      credentials: "include",
      signal: AbortSignal.timeout(60_000),
    });
    if (res.status >= 400) throw new Error(`download failed: ${res.status}`);
    const blob = await res.blob();
    const url = URL.createObjectURL(blob);
    const a = document.createElement("a");
    a.href = url;
    a.download = name;
    a.click();
    window.kept = blob; // held as the canvas holds it until the revoke, 30 s on
    setTimeout(() => URL.revokeObjectURL(url), 30_000);
    return { ok: true, size: blob.size };
  } catch (e) {
    return { ok: false, error: { name: e && e.name, message: e && e.message } };
  }
}
