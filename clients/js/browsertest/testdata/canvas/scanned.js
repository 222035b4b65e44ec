// The platform canvas's chat uploads with clients.md's drop-in for a
// server that scans for malware ("When the server scans for malware"):
// uploadChatFiles' body is the client's, as written there; the send hook
// (sentenceFor) is the canvas's own, imported from the drop-in's page.
import { uploadFiles, whenScanned } from "@pendinguploads/client";
import { sentenceFor, MAX_UPLOAD_BYTES, FileTooLargeError } from "./dropin.js";

let PLATFORM_URL = "";
let devToken = "";

function platformAuthHeaders() {
  return devToken ? { Authorization: `Bearer ${devToken}` } : {};
}

export async function uploadChatFiles(workspaceId, files) {
  for (const f of files) {
    if (f.size > MAX_UPLOAD_BYTES) throw new FileTooLargeError(f.name, f.size);
  }
  const opts = { headers: platformAuthHeaders, credentials: "include" };
  const { files: staged } = await uploadFiles(PLATFORM_URL, null, workspaceId, files, opts);
  await whenScanned(PLATFORM_URL, null, workspaceId, staged, { ...opts, intervalMs: 200 });
  return staged.map(({ uri, name, mimeType, size }) => ({ uri, name, mimeType, size }));
}

// ---- the test's harness ----

// send is one chat message of files ({name, text}), as a person attaches
// them: the attachments, or the sentence the chat shows.
export async function send({ api, token, ws, files }) {
  PLATFORM_URL = api;
  devToken = token;
  const picked = files.map((f) => new File([f.text], f.name, { type: f.type || "" }));
  try {
    const attachments = await uploadChatFiles(ws, picked);
    return { ok: true, attachments };
  } catch (e) {
    return { ok: false, error: { name: e && e.name, code: e && e.code, message: e && e.message }, sentence: sentenceFor(e) };
  }
}

// wait is whenScanned alone, for files staged before ({file_id, name}):
// the sentence the chat shows once their scans are decided, or ok.
export async function wait({ api, token, ws, files }) {
  PLATFORM_URL = api;
  devToken = token;
  try {
    await whenScanned(PLATFORM_URL, null, ws, files, { headers: platformAuthHeaders, credentials: "include", intervalMs: 200 });
    return { ok: true };
  } catch (e) {
    return { ok: false, error: { name: e && e.name, code: e && e.code, message: e && e.message }, sentence: sentenceFor(e) };
  }
}
