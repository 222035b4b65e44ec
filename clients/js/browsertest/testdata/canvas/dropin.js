// The platform canvas's chat uploads (its uploads.ts and the chat's send
// hook, as PLATFORM.md describes them) with README's drop-in ("Adopting it
// in the canvas"): the gate, platformAuthHeaders(), credentials
// "include", the sentences a person sees and the attachment download are
// the canvas's; only uploadChatFiles' body is the client's, imported by
// its package name through the page's import map. The harness functions
// below it are the test's.
import { uploadFiles, ack } from "@pendinguploads/client";
import { pattern } from "/page/harness.js";

// ---- the canvas ----

export const MAX_UPLOAD_BYTES = 100 * 1024 * 1024;

// What the canvas's build and host give it (PLATFORM_URL; the tenant's
// slug on a tenant host; a bearer only in local development), set for
// each step by configure.
let PLATFORM_URL = "";
let tenantSlug = "";
let devToken = "";

function platformAuthHeaders() {
  const h = {};
  if (tenantSlug) h["X-Molecule-Org-Slug"] = tenantSlug;
  if (devToken) h.Authorization = `Bearer ${devToken}`;
  return h;
}

export class FileTooLargeError extends Error {
  constructor(fileName, fileSize) {
    super(`${fileName} is ${(fileSize / 1024 / 1024).toFixed(1)}MB; files can be at most 100MB`);
    this.name = "FileTooLargeError";
    this.fileSize = fileSize;
  }
}

// uploadChatFiles is README's drop-in, as written there; extra is the
// test's (onProgress, partsInFlight, a short stallTimeoutMs).
export async function uploadChatFiles(workspaceId, files, extra = {}) {
  for (const f of files) {
    if (f.size > MAX_UPLOAD_BYTES) throw new FileTooLargeError(f.name, f.size);
  }
  const { files: staged } = await uploadFiles(PLATFORM_URL, null, workspaceId, files, {
    headers: platformAuthHeaders,
    credentials: "include",
    ...extra,
  });
  return staged.map(({ uri, name, mimeType, size }) => ({ uri, name, mimeType, size }));
}

// sentenceFor is the chat's send hook: what a person reads.
export function sentenceFor(e) {
  if (e instanceof FileTooLargeError) return e.message;
  if (e && e.name === "TimeoutError") return "Upload timed out — your connection is too slow for this file…";
  return "Upload failed: " + (e instanceof Error ? e.message : String(e));
}

// openAttachment re-opens an attachment from its platform-pending: URI,
// as the chat history does: a fetch with the same headers and
// credentials, the answer as a blob.
async function openAttachment(uri) {
  const [ws, file] = uri.slice("platform-pending:".length).split("/");
  const r = await fetch(`${PLATFORM_URL}/workspaces/${ws}/pending-uploads/${file}/content`, {
    credentials: "include",
    headers: platformAuthHeaders(),
  });
  return { status: r.status, blob: await r.blob() };
}

// ---- the test's harness ----

function configure({ api, slug, token }) {
  PLATFORM_URL = api || "";
  tenantSlug = slug || "";
  devToken = token || "";
}

// makeFile makes spec's File, the same bytes every time (pattern), and
// the same File (lastModified) when spec says so, as a file picked again
// after a reload is; it keeps the bytes for the comparisons. A spec with
// zeros is size zero bytes, made cheaply, for the gate.
const made = new Map();
function makeFile(spec) {
  const opts = { type: spec.type || "" };
  if (spec.lastModified) opts.lastModified = spec.lastModified;
  if (spec.zeros) {
    const mib = new Uint8Array(1 << 20);
    const parts = [];
    for (let n = spec.size; n > 0; n -= mib.length) parts.push(n >= mib.length ? mib : mib.subarray(0, n));
    return new File(parts, spec.name, opts);
  }
  const bytes = pattern(spec.size, spec.seed);
  made.set(spec, bytes);
  return new File([bytes], spec.name, opts);
}

// sameBytes compares a and b word by word.
function sameBytes(a, b) {
  if (a.length !== b.length) return false;
  const n = a.length & ~3;
  const words = (x) => (x.byteOffset % 4 === 0 ? new Uint32Array(x.buffer, x.byteOffset, n / 4) : new Uint32Array(x.slice(0, n).buffer));
  const wa = words(a);
  const wb = words(b);
  for (let i = 0; i < wa.length; i++) if (wa[i] !== wb[i]) return false;
  for (let i = n; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

async function check(att, spec) {
  try {
    const { status, blob } = await openAttachment(att.uri);
    const got = new Uint8Array(await blob.arrayBuffer());
    return { status, size: got.length, type: blob.type, same: sameBytes(got, made.get(spec)) };
  } catch (e) {
    return { error: `${e && e.name}: ${e && e.message}` };
  }
}

function errorJSON(e) {
  return { name: e && e.name, code: e && e.code, status: e && e.status, message: e && e.message };
}

function tracker() {
  const p = { count: 0, backwards: false, first: null, last: null, firstMs: null };
  const t0 = performance.now();
  return {
    p,
    onProgress(e) {
      p.count++;
      p.firstMs ??= performance.now() - t0;
      if (p.last && e.loaded < p.last.loaded) p.backwards = true;
      p.first ??= { loaded: e.loaded, total: e.total };
      p.last = { loaded: e.loaded, total: e.total };
    },
  };
}

// send is one chat message with files: the canvas's upload, then each
// attachment opened and compared byte for byte, acked (the workspace's
// side, through the client with the same headers), and opened and
// compared again (unless check is false: a measurement). With
// timeoutSignalMs the upload also gets AbortSignal.timeout of it, as the
// canvas gave its one POST.
export async function send({ api, slug, token, ws, files, partsInFlight, stallTimeoutMs, timeoutSignalMs, check: checked = true }) {
  configure({ api, slug, token });
  const picked = files.map(makeFile);
  const t = tracker();
  const start = performance.now();
  let attachments;
  try {
    const signal = timeoutSignalMs ? AbortSignal.timeout(timeoutSignalMs) : undefined;
    attachments = await uploadChatFiles(ws, picked, { onProgress: t.onProgress, partsInFlight, stallTimeoutMs, signal });
  } catch (e) {
    return { ok: false, ms: performance.now() - start, error: errorJSON(e), sentence: sentenceFor(e), progress: t.p };
  }
  const ms = performance.now() - start;
  if (!checked) return { ok: true, ms, attachments, progress: t.p };
  const before = [];
  for (let i = 0; i < files.length; i++) before.push(await check(attachments[i], files[i]));
  const acked = [];
  for (const a of attachments) {
    const id = a.uri.split("/").pop();
    try {
      acked.push((await ack(PLATFORM_URL, null, ws, id, { headers: platformAuthHeaders, credentials: "include" })).acked === true);
    } catch (e) {
      acked.push(false);
    }
  }
  const after = [];
  for (let i = 0; i < files.length; i++) after.push(await check(attachments[i], files[i]));
  return { ok: true, ms, attachments, progress: t.p, before, acked, after, stepMs: performance.now() - start };
}

// sendUntil starts send's upload and returns, leaving it running, once
// the test's bucket proxy (control, on this origin) says the bucket holds
// at least parts of the workspace's upload: the moment the page is
// reloaded.
export async function sendUntil({ api, slug, token, ws, files, parts, control }) {
  configure({ api, slug, token });
  const t = tracker();
  const start = performance.now();
  let failed = null;
  uploadChatFiles(ws, files.map(makeFile), { onProgress: t.onProgress }).catch((e) => (failed = errorJSON(e)));
  for (;;) {
    if (failed) return { ok: false, error: failed };
    const n = (await (await fetch(`${control}?ws=${ws}`)).json()).stored;
    if (n >= parts) return { ok: true, ms: performance.now() - start, stored: n, progress: t.p };
    if (performance.now() - start > 45_000) return { ok: false, error: { message: `${n} parts stored after 45 s` } };
    await new Promise((r) => setTimeout(r, 20));
  }
}
