// What the platform's canvas does with chat attachments (its uploads.ts,
// as PLATFORM.md describes it), and what another site's page can make a
// signed-in user's browser do. The canvas carries no bearer in
// production: its session cookie rides on every request (credentials
// "include"), beside its tenant header. api is PLATFORM_URL: empty when
// the platform's edge serves these paths on the canvas's own origin.
import { pattern } from "/page/harness.js";
import * as pu from "/page/pendinguploads.js";

const SLUG_HEADER = "X-Molecule-Org-Slug";

function hex(buf) {
  return [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function fail(e) {
  return { ok: false, error: `${e && e.name}: ${e && e.message}` };
}

// uploadAndOpen stages files as the canvas does (one POST, every file
// under "files"), then re-opens each attachment from its
// platform-pending: URI as the chat history does, and digests the bytes.
export async function uploadAndOpen({ api, ws, slug, files }) {
  const headers = { [SLUG_HEADER]: slug };
  const form = new FormData();
  for (const f of files) form.append("files", new File([pattern(f.size, f.seed)], f.name, { type: f.type || "" }));
  let res;
  try {
    res = await fetch(`${api}/workspaces/${ws}/chat/uploads`, { method: "POST", body: form, credentials: "include", headers });
  } catch (e) {
    return fail(e);
  }
  const text = await res.text();
  if (!res.ok) return { ok: false, status: res.status, body: text };
  const staged = JSON.parse(text).files;
  const downloads = [];
  for (const s of staged) {
    const [wsID, fileID] = s.uri.slice("platform-pending:".length).split("/");
    try {
      const r = await fetch(`${api}/workspaces/${wsID}/pending-uploads/${fileID}/content`, { credentials: "include", headers });
      const blob = await r.blob();
      downloads.push({ status: r.status, size: blob.size, type: blob.type, sha256: hex(await crypto.subtle.digest("SHA-256", await blob.arrayBuffer())) });
    } catch (e) {
      downloads.push(fail(e));
    }
  }
  return { ok: true, status: res.status, staged, downloads };
}

// viaClient does the same through the client module in session mode (no
// token): the canvas's other way in.
export async function viaClient({ api, ws, files }) {
  try {
    const blobs = files.map((f) => new File([pattern(f.size, f.seed)], f.name, { type: f.type || "" }));
    const { files: staged } = await pu.uploadFiles(api, null, ws, blobs);
    const d = await pu.downloadFile(api, null, ws, staged[0].file_id);
    return { ok: true, staged, downloaded: { size: d.blob.size, sha256: hex(await crypto.subtle.digest("SHA-256", await d.blob.arrayBuffer())) } };
  } catch (e) {
    return { ok: false, error: `${e && e.name}: ${e && e.message}`, status: e && e.status, code: e && e.code };
  }
}

// attacks: what a page on another origin of the same site (a sibling
// subdomain) can make the user's browser send with the cookie: a form
// POST, a no-cors fetch, a credentialed read, an <img>. None of their
// answers can be read; the service must refuse them all the same.
export async function attacks({ api, ws, fileId }) {
  const out = {};
  // A cross-site form POST, into a hidden frame.
  await new Promise((resolve) => {
    const frame = document.getElementById("sink");
    frame.onload = () => resolve();
    const formEl = document.createElement("form");
    formEl.method = "POST";
    formEl.enctype = "multipart/form-data";
    formEl.action = `${api}/workspaces/${ws}/chat/uploads`;
    formEl.target = "sink";
    const input = document.createElement("input");
    input.type = "file";
    input.name = "files";
    const dt = new DataTransfer();
    dt.items.add(new File(["planted by a form"], "form.txt", { type: "text/plain" }));
    input.files = dt.files;
    formEl.appendChild(input);
    document.body.appendChild(formEl);
    formEl.submit();
    setTimeout(resolve, 10_000);
  });
  out.form = "submitted";
  // A no-cors fetch: the request goes, the answer is opaque.
  try {
    const body = new FormData();
    body.append("files", new File(["planted by no-cors"], "nocors.txt", { type: "text/plain" }));
    const r = await fetch(`${api}/workspaces/${ws}/chat/uploads`, { method: "POST", mode: "no-cors", credentials: "include", body });
    out.noCors = r.type;
  } catch (e) {
    out.noCors = fail(e).error;
  }
  const ackURL = `${api}/workspaces/${ws}/pending-uploads/${fileId}/ack`;
  try {
    const r = await fetch(ackURL, { method: "POST", mode: "no-cors", credentials: "include" });
    out.ack = r.type;
  } catch (e) {
    out.ack = fail(e).error;
  }
  // A credentialed read: the browser refuses to hand over the answer.
  const contentURL = `${api}/workspaces/${ws}/pending-uploads/${fileId}/content`;
  try {
    const r = await fetch(contentURL, { credentials: "include" });
    out.read = { status: r.status, body: await r.text() };
  } catch (e) {
    out.read = fail(e).error;
  }
  // An <img>: a no-cors GET without an Origin.
  out.img = await new Promise((resolve) => {
    const img = new Image();
    img.onload = () => resolve("loaded");
    img.onerror = () => resolve("error");
    img.src = contentURL;
    setTimeout(() => resolve("timeout"), 10_000);
  });
  return out;
}
