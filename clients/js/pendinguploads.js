// pendinguploads browser client: stages files for a workspace the way the
// Go client does. Small files travel together as one multipart request;
// files too large for one request (a Lambda takes about 4 MiB) go through
// presign, a PUT straight to the bucket, and a JSON commit. No
// dependencies, no build step: an ES module for browsers (and any runtime
// with fetch, XMLHttpRequest and Blob).

/** Caps assumed when the server predates GET /uploads/limits (404). */
export const DEFAULT_LIMITS = Object.freeze({
  per_file_bytes: 25 * 1024 * 1024,
  per_request_bytes: 4 * 1024 * 1024,
  max_attachments_per_message: 64,
  presign: true,
});

// The upload route refuses more than 64 files in one request.
const MAX_FILES_PER_REQUEST = 64;
// JSON routes (limits, presign, commit, ack) must answer within this.
const JSON_TIMEOUT_MS = 60_000;
// A presigned PUT is valid 15 minutes; no single attempt outlives that.
const PUT_TIMEOUT_MS = 15 * 60_000;
// A multipart body is at most per_request_bytes (4 MiB by default).
const MULTIPART_TIMEOUT_MS = 5 * 60_000;
const DOWNLOAD_TIMEOUT_MS = 15 * 60_000;
// Error bodies are read for their message, never without bound.
const MAX_ERROR_BODY = 64 * 1024;
const DEFAULT_ATTEMPTS = 3;
const MAX_ATTEMPTS = 6;
const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 4_000;

/**
 * Every failure of this module. status is the HTTP status (0 when no
 * answer arrived: a network error, a CORS refusal, an abort, a check made
 * before sending); body is the parsed JSON error body when there was one;
 * code is one of "http", "network", "timeout", "aborted", "invalid",
 * "empty", "too_large", "digest_mismatch", "bad_response", "quota_exceeded"
 * (409: the workspace's quota on what waits; body names it). staged lists
 * the files that earlier requests of the same uploadFiles call did stage
 * before the failure (the server keeps those).
 */
export class PendingUploadsError extends Error {
  constructor(message, { status = 0, body = null, code = "http", cause, staged = [] } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "PendingUploadsError";
    this.status = status;
    this.body = body;
    this.code = code;
    this.staged = staged;
  }
}

function trimBase(api) {
  return String(api).replace(/\/+$/, "");
}

function wsURL(api, workspaceId, ...segments) {
  return [trimBase(api), "workspaces", encodeURIComponent(workspaceId), ...segments.map(encodeURIComponent)].join("/");
}

function abortedError(op, signal) {
  return new PendingUploadsError(`${op}: aborted`, { code: "aborted", cause: signal && signal.reason });
}

function throwIfAborted(op, signal) {
  if (signal && signal.aborted) throw abortedError(op, signal);
}

// linked returns a signal that aborts when outer does or after ms, and a
// function that detaches it; timedOut tells which one fired.
function linked(outer, ms) {
  const ctl = new AbortController();
  let timedOut = false;
  const onAbort = () => ctl.abort(outer.reason);
  if (outer) {
    if (outer.aborted) ctl.abort(outer.reason);
    else outer.addEventListener("abort", onAbort, { once: true });
  }
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort();
  }, ms);
  return {
    signal: ctl.signal,
    timedOut: () => timedOut,
    done() {
      clearTimeout(timer);
      if (outer) outer.removeEventListener("abort", onAbort);
    },
  };
}

function sleep(ms, signal, op) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(abortedError(op, signal));
    const t = setTimeout(() => {
      if (signal) signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortedError(op, signal));
    };
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
  });
}

// retryable: no answer (network, timeout) or an answer that says the
// server or the bucket failed, or asks to come back.
function retryable(err) {
  if (!(err instanceof PendingUploadsError)) return false;
  if (err.code === "network" || err.code === "timeout") return true;
  return err.code === "http" && (err.status >= 500 || err.status === 429 || err.status === 408);
}

// withRetries runs fn up to attempts times while the error is retryable,
// with exponential backoff and jitter. Only for requests that are safe to
// send again.
async function withRetries(op, attempts, signal, fn) {
  const n = Math.min(Math.max(1, Math.floor(attempts || DEFAULT_ATTEMPTS)), MAX_ATTEMPTS);
  for (let i = 1; ; i++) {
    try {
      return await fn(i);
    } catch (err) {
      if (i >= n || !retryable(err) || (signal && signal.aborted)) throw err;
      const d = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (i - 1));
      await sleep(d / 2 + Math.random() * (d / 2), signal, op);
    }
  }
}

function parseErrorBody(text) {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" ? v : null;
  } catch {
    return null;
  }
}

function httpError(op, status, text) {
  const body = parseErrorBody(String(text || "").slice(0, MAX_ERROR_BODY));
  const msg = body && typeof body.error === "string" ? body.error : `HTTP ${status}`;
  if (status === 409 && body && typeof body.quota === "string") {
    // The workspace's mailbox is full: nothing was stored.
    return new PendingUploadsError(`${op}: ${msg} (${body.quota}: ${body.pending} waiting + ${body.adding} would pass ${body.limit})`, { status, body, code: "quota_exceeded" });
  }
  return new PendingUploadsError(`${op}: ${msg}`, { status, body, code: "http" });
}

// authHeaders is a bearer token's Authorization header, or none in
// session mode (token null or ""): the page's session cookie is the
// credential then, sent with credentials "include" (the service's CORS
// allows them for its listed origins).
function authHeaders(token) {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

// request sends one fetch and returns the Response when it is 2xx. With
// session, the browser's cookies go with it.
async function request(op, url, { method = "GET", headers = {}, body, signal, timeoutMs = JSON_TIMEOUT_MS, session = false }) {
  throwIfAborted(op, signal);
  const l = linked(signal, timeoutMs);
  let resp;
  try {
    resp = await fetch(url, { method, headers, body, signal: l.signal, redirect: "follow", credentials: session ? "include" : "omit" });
  } catch (err) {
    l.done();
    if (signal && signal.aborted) throw abortedError(op, signal);
    if (l.timedOut()) throw new PendingUploadsError(`${op}: no answer within ${timeoutMs} ms`, { code: "timeout", cause: err });
    throw new PendingUploadsError(`${op}: network error (or the server's CORS does not allow this origin)`, { code: "network", cause: err });
  }
  if (!resp.ok) {
    let text = "";
    try {
      text = await resp.text();
    } catch {
      // the status says enough
    }
    l.done();
    throw httpError(op, resp.status, text);
  }
  return { resp, done: l.done, signal: l.signal, timedOut: l.timedOut };
}

async function requestJSON(op, url, opts) {
  const r = await request(op, url, opts);
  try {
    return await r.resp.json();
  } catch (err) {
    if (opts.signal && opts.signal.aborted) throw abortedError(op, opts.signal);
    throw new PendingUploadsError(`${op}: the answer is not JSON`, { status: r.resp.status, code: "bad_response", cause: err });
  } finally {
    r.done();
  }
}

function forbiddenHeader(name) {
  // Browsers set these themselves and refuse them from scripts.
  return ["content-length", "host", "connection", "expect", "transfer-encoding"].includes(name.toLowerCase());
}

// xhrSend sends body with XMLHttpRequest, the only browser API that
// reports upload progress. It resolves with the status and text of any
// answer; it rejects only when no answer arrived.
function xhrSend(op, { method, url, headers, body, signal, timeoutMs, onUploadProgress, session = false }) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(abortedError(op, signal));
    const x = new XMLHttpRequest();
    const onAbort = () => x.abort();
    const cleanup = () => {
      if (signal) signal.removeEventListener("abort", onAbort);
    };
    x.open(method, url);
    x.withCredentials = session;
    for (const [k, v] of Object.entries(headers || {})) {
      if (!forbiddenHeader(k)) x.setRequestHeader(k, v);
    }
    x.timeout = timeoutMs;
    if (onUploadProgress) x.upload.onprogress = (e) => onUploadProgress(e.loaded);
    x.onload = () => {
      cleanup();
      resolve({ status: x.status, text: x.responseText });
    };
    x.onerror = () => {
      cleanup();
      reject(new PendingUploadsError(`${op}: network error (or CORS does not allow this origin)`, { code: "network" }));
    };
    x.ontimeout = () => {
      cleanup();
      reject(new PendingUploadsError(`${op}: no answer within ${timeoutMs} ms`, { code: "timeout" }));
    };
    x.onabort = () => {
      cleanup();
      reject(abortedError(op, signal));
    };
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
    x.send(body);
  });
}

function checkLimits(v) {
  const n = (x) => typeof x === "number" && Number.isSafeInteger(x) && x > 0;
  if (!v || !n(v.per_file_bytes) || !n(v.per_request_bytes) || typeof v.presign !== "boolean") {
    throw new PendingUploadsError("limits: the answer lacks per_file_bytes, per_request_bytes or presign", { status: 200, body: v, code: "bad_response" });
  }
  return {
    per_file_bytes: v.per_file_bytes,
    per_request_bytes: v.per_request_bytes,
    max_attachments_per_message: n(v.max_attachments_per_message) ? v.max_attachments_per_message : MAX_FILES_PER_REQUEST,
    presign: v.presign,
  };
}

/**
 * Reads GET {api}/uploads/limits (public, no token). A server that does
 * not have the route (404) is taken to have DEFAULT_LIMITS.
 */
export async function getLimits(api, { signal, attempts } = {}) {
  const op = "limits";
  try {
    return checkLimits(await withRetries(op, attempts, signal, () => requestJSON(op, `${trimBase(api)}/uploads/limits`, { signal })));
  } catch (err) {
    if (err instanceof PendingUploadsError && err.status === 404) return { ...DEFAULT_LIMITS };
    throw err;
  }
}

const enc = new TextEncoder();

function randomBoundary() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return "pendinguploads-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function dropControls(s) {
  return s.replace(/[\u0000-\u001f\u007f]/g, "_");
}

function fileName(f) {
  return typeof f.name === "string" && f.name !== "" ? f.name : "file";
}

function fileType(f) {
  return dropControls(f.type || "application/octet-stream");
}

// layoutMultipart lays out a multipart/form-data body of files (field
// "files") with exact byte offsets: the body Blob, its size, and where
// each file's bytes start in it (for progress).
function layoutMultipart(files, boundary) {
  const parts = [];
  const starts = [];
  let size = 0;
  files.forEach((f, i) => {
    const name = dropControls(fileName(f)).replace(/\\/g, "\\\\").replace(/"/g, '\\"');
    const head = enc.encode(
      (i === 0 ? "" : "\r\n") +
        `--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="${name}"\r\n` +
        `Content-Type: ${fileType(f)}\r\n\r\n`,
    );
    parts.push(head, f);
    size += head.byteLength;
    starts.push(size);
    size += f.size;
  });
  const tail = enc.encode(`\r\n--${boundary}--\r\n`);
  parts.push(tail);
  size += tail.byteLength;
  return { parts, size, starts };
}

function multipartSize(files) {
  // The boundary has a fixed length, so any one gives the size.
  return layoutMultipart(files, randomBoundary()).size;
}

// packBatches groups the indexes idx (each fits alone) into requests of
// at most limit bytes and 64 files, in order.
function packBatches(files, idx, limit) {
  const out = [];
  let cur = [];
  for (const i of idx) {
    const next = [...cur, i];
    if (cur.length > 0 && (next.length > MAX_FILES_PER_REQUEST || multipartSize(next.map((k) => files[k])) > limit)) {
      out.push(cur);
      cur = [i];
    } else {
      cur = next;
    }
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

function hex(buf) {
  return Array.from(new Uint8Array(buf), (x) => x.toString(16).padStart(2, "0")).join("");
}

function hasDigest() {
  return typeof crypto !== "undefined" && crypto.subtle && typeof crypto.subtle.digest === "function";
}

async function sha256Hex(blob) {
  return hex(await crypto.subtle.digest("SHA-256", await blob.arrayBuffer()));
}

function stagedList(op, v, n) {
  if (!v || !Array.isArray(v.files) || v.files.length !== n) {
    throw new PendingUploadsError(`${op}: the server answered ${v && Array.isArray(v.files) ? v.files.length : "no"} files for ${n} sent`, { status: 200, body: v, code: "bad_response" });
  }
  return v.files;
}

function parseJSONText(op, status, text) {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new PendingUploadsError(`${op}: the answer is not JSON`, { status, code: "bad_response", cause: err });
  }
}

/**
 * Stages files (File or Blob objects; a Blob without a name is "file")
 * for workspaceId and resolves with the upload route's answer,
 * {files:[{file_id, uri, name, mimeType, size, sha256}]}, in input order.
 *
 * Large files first: presign, a PUT of each to the bucket (retried), and
 * only then, after the small files' multipart requests (never retried),
 * one commit per 64 large files (retried when its answer was lost: a
 * repeated commit answers with the same files). So an abort or a failure
 * while the large files travel stores nothing at all.
 *
 * onProgress({loaded, total, index, file, fileLoaded, fileTotal}) reports
 * the file bytes sent, over all files; it ends with loaded === total. A
 * PUT that is retried starts its file over, so loaded may go back.
 *
 * Aborting signal aborts the request in flight and rejects with
 * code "aborted"; a PUT aborted is never committed.
 */
export async function uploadFiles(api, token, workspaceId, files, { onProgress, signal, limits, attempts } = {}) {
  const op = "upload";
  const list = Array.from(files || []);
  if (list.length === 0) throw new PendingUploadsError(`${op}: no files`, { code: "invalid" });
  for (const f of list) {
    if (typeof Blob === "undefined" || !(f instanceof Blob)) throw new PendingUploadsError(`${op}: every file must be a File or a Blob`, { code: "invalid" });
  }
  throwIfAborted(op, signal);
  const lim = limits ? checkLimits(limits) : await getLimits(api, { signal, attempts });

  const small = [];
  const large = [];
  for (let i = 0; i < list.length; i++) {
    const f = list[i];
    const name = fileName(f);
    if (f.size === 0) {
      throw new PendingUploadsError(`${op}: ${name} is empty (the server refuses empty files)`, { code: "empty", body: { error: "empty file", filename: name } });
    }
    if (f.size > lim.per_file_bytes) {
      throw new PendingUploadsError(`${op}: ${name} is ${f.size} bytes, over the per-file cap of ${lim.per_file_bytes}`, {
        code: "too_large",
        body: { error: "file exceeds per-file cap", filename: name, size: f.size, max: lim.per_file_bytes },
      });
    }
    if (multipartSize([f]) <= lim.per_request_bytes) small.push(i);
    else if (lim.presign) large.push(i);
    else {
      throw new PendingUploadsError(`${op}: ${name} (${f.size} bytes) does not fit one request (${lim.per_request_bytes} bytes) and the server offers no presigned uploads`, {
        code: "too_large",
        body: { error: "request body too large", max: lim.per_request_bytes },
      });
    }
  }

  // Hash while the bytes travel, one file at a time (each is read whole
  // into memory); checked against the server's answers.
  let chain = Promise.resolve();
  const digests = hasDigest() ? list.map((f) => (chain = chain.then(() => sha256Hex(f)))) : null;
  if (digests) digests.forEach((p) => p.catch(() => {}));

  const total = list.reduce((s, f) => s + f.size, 0);
  const sent = new Array(list.length).fill(0);
  let loaded = 0;
  const report = (i, n) => {
    n = Math.max(0, Math.min(list[i].size, n));
    if (n === sent[i]) return;
    loaded += n - sent[i];
    sent[i] = n;
    if (onProgress) onProgress({ loaded, total, index: i, file: list[i], fileLoaded: n, fileTotal: list[i].size });
  };

  const out = new Array(list.length);
  const staged = () => out.filter(Boolean);
  try {
    const commits = [];
    for (let s = 0; s < large.length; s += MAX_FILES_PER_REQUEST) {
      const batch = large.slice(s, s + MAX_FILES_PER_REQUEST);
      const ups = await presign(api, token, workspaceId, batch.map((i) => list[i]), { signal, attempts });
      for (let k = 0; k < batch.length; k++) {
        const i = batch[k];
        await putPresigned(ups[k], list[i], { signal, attempts, onUploadProgress: (n) => report(i, n) });
        report(i, list[i].size);
      }
      commits.push({ batch, ids: ups.map((u) => u.upload_id) });
    }
    for (const batch of packBatches(list, small, lim.per_request_bytes)) {
      const got = await postMultipart(api, token, workspaceId, batch.map((i) => list[i]), {
        signal,
        onBodyProgress: (starts, n) => batch.forEach((i, k) => report(i, n - starts[k])),
      });
      batch.forEach((i, k) => {
        out[i] = got[k];
        report(i, list[i].size);
      });
    }
    for (const c of commits) {
      const got = await commit(api, token, workspaceId, c.ids, { signal, attempts });
      c.batch.forEach((i, k) => (out[i] = got[k]));
    }
    if (digests) {
      for (let i = 0; i < list.length; i++) {
        const want = await digests[i];
        if (String(out[i].sha256).toLowerCase() !== want) {
          throw new PendingUploadsError(`${op}: ${fileName(list[i])}: the server stored sha256 ${out[i].sha256}, the file has ${want}`, {
            code: "digest_mismatch",
            body: out[i],
          });
        }
      }
    }
  } catch (err) {
    const e = err instanceof PendingUploadsError ? err : new PendingUploadsError(`${op}: ${err && err.message}`, { code: "invalid", cause: err });
    e.staged = staged();
    throw e;
  }
  return { files: out };
}

async function presign(api, token, workspaceId, files, { signal, attempts }) {
  const op = "presign";
  const body = JSON.stringify({ files: files.map((f) => ({ name: fileName(f), size: f.size, mimeType: f.type || "" })) });
  // Safe to repeat: nothing is visible until a commit.
  const v = await withRetries(op, attempts, signal, () =>
    requestJSON(op, wsURL(api, workspaceId, "chat", "uploads", "presign"), {
      method: "POST",
      headers: { ...authHeaders(token), "Content-Type": "application/json" },
      session: !token,
      body,
      signal,
    }),
  );
  if (!v || !Array.isArray(v.uploads) || v.uploads.length !== files.length) {
    throw new PendingUploadsError(`${op}: the server answered ${v && Array.isArray(v.uploads) ? v.uploads.length : "no"} uploads for ${files.length} files`, { status: 200, body: v, code: "bad_response" });
  }
  return v.uploads;
}

// putPresigned sends f to the bucket with exactly the presigned method,
// URL and headers (less Content-Length, which the browser sets from the
// body), no Authorization. Retried: the same bytes to the same key.
async function putPresigned(up, f, { signal, attempts, onUploadProgress }) {
  const op = `put ${fileName(f)}`;
  const headers = up.headers || {};
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === "content-length" && String(v) !== String(f.size)) {
      throw new PendingUploadsError(`${op}: presigned for ${v} bytes, the file has ${f.size}`, { code: "bad_response", body: up });
    }
  }
  await withRetries(op, attempts, signal, async () => {
    onUploadProgress(0);
    const r = await xhrSend(op, { method: up.method || "PUT", url: up.url, headers, body: f, signal, timeoutMs: PUT_TIMEOUT_MS, onUploadProgress });
    if (r.status < 200 || r.status > 299) {
      throw new PendingUploadsError(`${op}: the bucket answered ${r.status}`, { status: r.status, code: "http" });
    }
  });
}

// postMultipart stages files in one multipart request: all or nothing.
// Never retried: when the answer is lost, the files may be stored.
async function postMultipart(api, token, workspaceId, files, { signal, onBodyProgress }) {
  const op = "upload";
  const boundary = randomBoundary();
  const mb = layoutMultipart(files, boundary);
  const r = await xhrSend(op, {
    method: "POST",
    url: wsURL(api, workspaceId, "chat", "uploads"),
    headers: { ...authHeaders(token), "Content-Type": `multipart/form-data; boundary=${boundary}` },
    session: !token,
    body: new Blob(mb.parts),
    signal,
    timeoutMs: MULTIPART_TIMEOUT_MS,
    onUploadProgress: (n) => onBodyProgress(mb.starts, n),
  });
  if (r.status < 200 || r.status > 299) throw httpError(op, r.status, r.text);
  return stagedList(op, parseJSONText(op, r.status, r.text), files.length);
}

// commit stages presigned uploads (form B). Retried when no answer came
// or the server failed (5xx): a commit whose uploads were all committed
// before answers 200 with the same files. A 409 is not retried.
async function commit(api, token, workspaceId, ids, { signal, attempts }) {
  const op = "commit";
  const v = await withRetries(op, attempts, signal, () =>
    requestJSON(op, wsURL(api, workspaceId, "chat", "uploads"), {
      method: "POST",
      headers: { ...authHeaders(token), "Content-Type": "application/json" },
      session: !token,
      body: JSON.stringify({ files: ids.map((id) => ({ upload_id: id })) }),
      signal,
    }),
  );
  return stagedList(op, v, ids.length);
}

// dispositionName takes filename* (RFC 5987, UTF-8) over filename.
function dispositionName(h) {
  if (!h) return "";
  const star = /filename\*\s*=\s*UTF-8''([^;\s]+)/i.exec(h);
  if (star) {
    try {
      return decodeURIComponent(star[1]);
    } catch {
      // fall back to the plain form
    }
  }
  const plain = /filename\s*=\s*"((?:[^"\\]|\\.)*)"/i.exec(h);
  return plain ? plain[1].replace(/\\(.)/g, "$1") : "";
}

function base64ToHex(b64) {
  const bin = atob(b64);
  let s = "";
  for (let i = 0; i < bin.length; i++) s += bin.charCodeAt(i).toString(16).padStart(2, "0");
  return s;
}

/**
 * Fetches a staged file's bytes. When the answer carries Content-Digest
 * (sha-256) and the browser has SubtleCrypto, the bytes are checked
 * against it (mismatch: code "digest_mismatch"). sha256 is the hex digest
 * of the bytes received (or the header's, unchecked, without
 * SubtleCrypto; null when neither).
 */
export async function downloadFile(api, token, workspaceId, fileId, { signal } = {}) {
  const op = "download";
  const r = await request(op, wsURL(api, workspaceId, "pending-uploads", fileId, "content"), {
    headers: authHeaders(token),
    session: !token,
    signal,
    timeoutMs: DOWNLOAD_TIMEOUT_MS,
  });
  let blob;
  try {
    blob = await r.resp.blob();
  } catch (err) {
    if (signal && signal.aborted) throw abortedError(op, signal);
    if (r.timedOut()) throw new PendingUploadsError(`${op}: not received within ${DOWNLOAD_TIMEOUT_MS} ms`, { code: "timeout", cause: err });
    throw new PendingUploadsError(`${op}: the body was cut off`, { code: "network", cause: err });
  } finally {
    r.done();
  }
  const h = r.resp.headers;
  const m = /sha-256=:([A-Za-z0-9+/=]+):/i.exec(h.get("Content-Digest") || "");
  const declared = m ? base64ToHex(m[1]) : null;
  let sha256 = declared;
  if (hasDigest()) {
    sha256 = await sha256Hex(blob);
    if (declared && declared !== sha256) {
      throw new PendingUploadsError(`${op}: Content-Digest says sha256 ${declared}, the bytes have ${sha256}`, { status: r.resp.status, code: "digest_mismatch" });
    }
  }
  const ctype = (h.get("Content-Type") || "application/octet-stream").split(";")[0].trim();
  return { blob, name: dispositionName(h.get("Content-Disposition")), mimeType: ctype, size: blob.size, sha256 };
}

/**
 * Acknowledges a staged file (the workspace's side; idempotent, so
 * retried). Resolves with the answer, {acked: true} (raced: true when a
 * sweep took the row meanwhile).
 */
export async function ack(api, token, workspaceId, fileId, { signal, attempts } = {}) {
  const op = "ack";
  return withRetries(op, attempts, signal, () =>
    requestJSON(op, wsURL(api, workspaceId, "pending-uploads", fileId, "ack"), {
      method: "POST",
      headers: authHeaders(token),
      session: !token,
      signal,
    }),
  );
}
