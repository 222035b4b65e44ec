// pendinguploads browser client: stages files for a workspace the way the
// Go client does. Small files travel together as one multipart request;
// files too large for one request (a Lambda takes about 4 MiB) go through
// presign, a PUT straight to the bucket, and a JSON commit; files above
// the server's multipart threshold go to the bucket in parts, a few at a
// time, and resume after a lost connection or a reloaded page. No
// dependencies, no build step: an ES module for browsers (and any runtime
// with fetch, XMLHttpRequest and Blob).

/** Caps assumed when the server predates GET /uploads/limits (404). */
export const DEFAULT_LIMITS = Object.freeze({
  per_file_bytes: 25 * 1024 * 1024,
  per_request_bytes: 4 * 1024 * 1024,
  max_attachments_per_message: 64,
  presign: true,
  multipart_threshold_bytes: null,
  multipart_part_bytes: null,
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
// A transfer is given up when no byte moved for max(STALL_MIN_MS, its
// bytes / STALL_FLOOR_BYTES_PER_MS) (stallTimeoutMs sets another): the
// canvas's own floor, about 100 KB/s, the slowest uplink it allows for.
const STALL_MIN_MS = 60_000;
const STALL_FLOOR_BYTES_PER_MS = 100;
// Error bodies are read for their message, never without bound.
const MAX_ERROR_BODY = 64 * 1024;
const DEFAULT_ATTEMPTS = 3;
const MAX_ATTEMPTS = 6;
const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 4_000;
// Parts of one file in flight at once (partsInFlight).
const DEFAULT_PARTS_IN_FLIGHT = 4;
const MAX_PARTS_IN_FLIGHT = 16;
// A part's PUT URL is valid 15 minutes (the service says when in
// expires_at); a part that would start later than a minute before that
// asks for fresh URLs first.
const PART_URL_TTL_MS = 15 * 60_000;
const PART_URL_MARGIN_MS = 60_000;
// Dropping an aborted upload on the server takes at most this.
const ABORT_TIMEOUT_MS = 10_000;
// The whole-file hash yields to the page after each step of this many
// bytes.
const HASH_STEP = 1 << 20;
// Keys of the default resume store in localStorage.
const RESUME_PREFIX = "pendinguploads.resume:";
const RESUME_MAX_AGE_MS = 24 * 60 * 60_000;

/**
 * Every failure of this module. Its message is a sentence a person can
 * read as it is (the canvas shows "Upload failed: " + message): the
 * workspace's quota, the per-file cap, the service or the bucket being
 * unavailable each say so in plain words. status is the HTTP status (0
 * when no answer arrived: a network error, a CORS refusal, an abort, a
 * check made before sending); body is the parsed JSON error body when
 * there was one; code is one of "http", "network", "timeout", "aborted",
 * "invalid", "empty", "too_large", "digest_mismatch" (the answer's
 * SHA-256 is not the file's, or the bucket refused a part's bytes for
 * their checksum), "bad_response", "quota_exceeded" (409: the
 * workspace's quota on what waits; body names it). Branch on code, never
 * on the message. name is "TimeoutError" for code "timeout" (a transfer
 * that stalled, a request unanswered) and for an abort whose reason is a
 * TimeoutError (AbortSignal.timeout), so callers that tell a slow
 * connection by the error's name keep working; else "PendingUploadsError".
 * staged lists the files that earlier requests of the same uploadFiles
 * call did stage before the failure (the server keeps those).
 */
export class PendingUploadsError extends Error {
  constructor(message, { status = 0, body = null, code = "http", cause, staged = [] } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    const timedOut = code === "timeout" || (code === "aborted" && cause != null && cause.name === "TimeoutError");
    this.name = timedOut ? "TimeoutError" : "PendingUploadsError";
    this.status = status;
    this.body = body;
    this.code = code;
    this.staged = staged;
  }
}

// formatBytes names a size for a person: "100 MiB", "4.5 MiB", "300 KiB".
function formatBytes(n) {
  if (!Number.isFinite(n)) return String(n);
  const units = [
    [1 << 30, "GiB"],
    [1 << 20, "MiB"],
    [1 << 10, "KiB"],
  ];
  for (const [u, name] of units) {
    if (n >= u) {
      const v = n / u;
      return `${v >= 10 || Number.isInteger(v) ? Math.round(v) : v.toFixed(1)} ${name}`;
    }
  }
  return `${n} bytes`;
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
    const files = body.quota === "pending_files";
    const amount = (n) => (files ? `${n} ${n === 1 ? "file" : "files"}` : formatBytes(n));
    return new PendingUploadsError(
      `the workspace has ${amount(body.pending)} waiting, and this upload (${amount(body.adding)}) would pass its limit of ${amount(body.limit)}; ` +
        "it takes more once the workspace fetches and acknowledges what waits",
      { status, body, code: "quota_exceeded" },
    );
  }
  if (status === 413 && body && Number.isFinite(body.max)) {
    const m =
      typeof body.filename === "string" && Number.isFinite(body.size)
        ? `${body.filename} is ${formatBytes(body.size)}, over the limit of ${formatBytes(body.max)} per file`
        : `the request is over the ${formatBytes(body.max)} one request may carry`;
    return new PendingUploadsError(m, { status, body, code: "too_large" });
  }
  if (status === 401) {
    return new PendingUploadsError(`not signed in, or the session has expired (${status}: ${msg})`, { status, body, code: "http" });
  }
  if (status >= 500 || status === 429) {
    return new PendingUploadsError(`the upload service is unavailable right now (${status}: ${msg}); try again in a moment`, { status, body, code: "http" });
  }
  return new PendingUploadsError(`${op}: ${msg} (${status})`, { status, body, code: "http" });
}

function networkError(op, peer, cause) {
  const m =
    peer === "bucket"
      ? "could not reach the file storage (the connection failed, or its CORS rule does not allow this page)"
      : "could not reach the upload service (the connection failed, or its CORS does not allow this page)";
  return new PendingUploadsError(`${m} [${op}]`, { code: "network", cause });
}

// seconds names a duration for a person.
function seconds(ms) {
  return `${(ms / 1000).toFixed(ms < 10_000 && ms % 1000 !== 0 ? 1 : 0)} s`;
}

function timeoutError(op, what, cause) {
  return new PendingUploadsError(`${what}: the connection is too slow or has stopped [${op}]`, { code: "timeout", cause });
}

const CREDENTIALS = ["include", "same-origin", "omit"];

// service is what every request to the service carries, from a call's
// arguments: the bearer token (or none), the caller's extra headers (an
// object, or a function called for each request) and the fetch
// credentials mode (default "include" without a token: the page's
// session cookie is the credential; "omit" with one). Never used for the
// bucket.
function service(op, api, token, workspaceId, { headers, credentials } = {}) {
  if (headers !== undefined && headers !== null && typeof headers !== "function" && typeof headers !== "object") {
    throw new PendingUploadsError(`${op}: headers must be an object or a function that returns one`, { code: "invalid" });
  }
  if (credentials !== undefined && !CREDENTIALS.includes(credentials)) {
    throw new PendingUploadsError(`${op}: credentials must be one of ${CREDENTIALS.join(", ")}`, { code: "invalid" });
  }
  return { api, token, workspaceId, extraHeaders: headers || null, credentials: credentials || (token ? "omit" : "include") };
}

// serviceHeaders is the headers of one request to the service: the
// caller's (asked anew for each request), then the bearer token's
// Authorization, then ours (Content-Type), later ones winning whatever
// their case.
async function serviceHeaders(op, svc, ours = {}) {
  const h = new Headers();
  if (svc.extraHeaders) {
    let extra;
    try {
      extra = typeof svc.extraHeaders === "function" ? await svc.extraHeaders() : svc.extraHeaders;
      for (const [k, v] of Object.entries(extra || {})) if (v !== undefined && v !== null) h.set(k, String(v));
    } catch (err) {
      throw new PendingUploadsError(`${op}: the caller's headers: ${err && err.message}`, { code: "invalid", cause: err });
    }
  }
  if (svc.token) h.set("Authorization", `Bearer ${svc.token}`);
  for (const [k, v] of Object.entries(ours)) h.set(k, v);
  return Object.fromEntries(h);
}

// request sends one fetch to the service and returns the Response when it
// is 2xx.
async function request(op, url, { method = "GET", headers = {}, body, signal, timeoutMs = JSON_TIMEOUT_MS, credentials = "omit" }) {
  throwIfAborted(op, signal);
  const l = linked(signal, timeoutMs);
  let resp;
  try {
    resp = await fetch(url, { method, headers, body, signal: l.signal, redirect: "follow", credentials });
  } catch (err) {
    l.done();
    if (signal && signal.aborted) throw abortedError(op, signal);
    if (l.timedOut()) throw timeoutError(op, `no answer within ${seconds(timeoutMs)}`, err);
    throw networkError(op, "service", err);
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

// serviceJSON is one JSON request to the service, with what svc says
// every such request carries.
async function serviceJSON(op, svc, url, { method = "GET", json, signal, timeoutMs } = {}) {
  const headers = await serviceHeaders(op, svc, json === undefined ? {} : { "Content-Type": "application/json" });
  return requestJSON(op, url, { method, headers, body: json === undefined ? undefined : JSON.stringify(json), signal, timeoutMs, credentials: svc.credentials });
}

function forbiddenHeader(name) {
  // Browsers set these themselves and refuse them from scripts.
  return ["content-length", "host", "connection", "expect", "transfer-encoding"].includes(name.toLowerCase());
}

// stallLimit is how long a request of bytes may go without a byte moving
// before it is given up: stallTimeoutMs when the caller set it, else the
// canvas's floor of about 100 KB/s over the request's bytes, and never
// less than a minute.
function stallLimit(stallTimeoutMs, bytes) {
  if (Number.isFinite(stallTimeoutMs) && stallTimeoutMs > 0) return stallTimeoutMs;
  return Math.max(STALL_MIN_MS, Math.ceil(bytes / STALL_FLOOR_BYTES_PER_MS));
}

// xhrSend sends body with XMLHttpRequest, the only browser API that
// reports upload progress. It resolves with the status and text of any
// answer; it rejects only when no answer arrived: code "timeout" when no
// byte moved either way for stallMs (or the whole request outlived
// timeoutMs). peer ("bucket" or "service") names who did not answer.
// withCredentials only for the service, with credentials "include".
function xhrSend(op, { method, url, headers, body, signal, timeoutMs, stallMs, onUploadProgress, peer, withCredentials = false }) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(abortedError(op, signal));
    const x = new XMLHttpRequest();
    let stalled = false;
    let stallTimer;
    const arm = () => {
      clearTimeout(stallTimer);
      stallTimer = setTimeout(() => {
        stalled = true;
        x.abort();
      }, stallMs);
    };
    const onAbort = () => x.abort();
    const cleanup = () => {
      clearTimeout(stallTimer);
      if (signal) signal.removeEventListener("abort", onAbort);
    };
    x.open(method, url);
    x.withCredentials = withCredentials;
    for (const [k, v] of Object.entries(headers || {})) {
      if (!forbiddenHeader(k)) x.setRequestHeader(k, v);
    }
    x.timeout = timeoutMs;
    let last = -1;
    x.upload.onprogress = (e) => {
      if (e.loaded > last) {
        last = e.loaded;
        arm();
      }
      if (onUploadProgress) onUploadProgress(e.loaded);
    };
    x.upload.onload = arm;
    x.onprogress = arm;
    x.onload = () => {
      cleanup();
      resolve({ status: x.status, text: x.responseText });
    };
    x.onerror = () => {
      cleanup();
      reject(networkError(op, peer));
    };
    x.ontimeout = () => {
      cleanup();
      reject(timeoutError(op, `not done within ${seconds(timeoutMs)}`));
    };
    x.onabort = () => {
      cleanup();
      if (stalled && !(signal && signal.aborted)) reject(timeoutError(op, `no byte moved for ${seconds(stallMs)}`));
      else reject(abortedError(op, signal));
    };
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
    arm();
    x.send(body);
  });
}

function checkLimits(v) {
  const n = (x) => typeof x === "number" && Number.isSafeInteger(x) && x > 0;
  if (!v || !n(v.per_file_bytes) || !n(v.per_request_bytes) || typeof v.presign !== "boolean") {
    throw new PendingUploadsError("limits: the answer lacks per_file_bytes, per_request_bytes or presign", { status: 200, body: v, code: "bad_response" });
  }
  // Parts only where the server says both (null: a server without a
  // bucket, or one that predates them).
  const parts = v.presign && n(v.multipart_threshold_bytes) && n(v.multipart_part_bytes);
  return {
    per_file_bytes: v.per_file_bytes,
    per_request_bytes: v.per_request_bytes,
    max_attachments_per_message: n(v.max_attachments_per_message) ? v.max_attachments_per_message : MAX_FILES_PER_REQUEST,
    presign: v.presign,
    multipart_threshold_bytes: parts ? v.multipart_threshold_bytes : null,
    multipart_part_bytes: parts ? v.multipart_part_bytes : null,
  };
}

/**
 * Reads GET {api}/uploads/limits (public, no token). A server that does
 * not have the route (404) is taken to have DEFAULT_LIMITS. headers and
 * credentials, as uploadFiles takes them, go with it.
 */
export async function getLimits(api, { signal, attempts, headers, credentials } = {}) {
  const op = "limits";
  const svc = service(op, api, null, "", { headers, credentials: credentials || "omit" });
  try {
    return checkLimits(await withRetries(op, attempts, signal, () => serviceJSON(op, svc, `${trimBase(api)}/uploads/limits`, { signal })));
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

// SHA-256 round constants (FIPS 180-4).
const K256 = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

// Sha256 hashes a stream of bytes a chunk at a time: SubtleCrypto has no
// incremental digest, and a file sent in parts is never held whole, so
// its whole-file SHA-256 is computed here, from the same reads that
// SubtleCrypto hashes part by part. About 50-100 MB/s.
class Sha256 {
  constructor() {
    this.h = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    this.w = new Int32Array(64);
    this.buf = new Uint8Array(64);
    this.n = 0; // bytes waiting in buf
    this.len = 0; // bytes hashed
  }

  block(b, o) {
    const w = this.w;
    const h = this.h;
    for (let i = 0; i < 16; i++, o += 4) w[i] = (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3];
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15];
      const y = w[i - 2];
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    let a = h[0];
    let b1 = h[1];
    let c = h[2];
    let d = h[3];
    let e = h[4];
    let f = h[5];
    let g = h[6];
    let k = h[7];
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (k + S1 + ((e & f) ^ (~e & g)) + K256[i] + w[i]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b1) ^ (a & c) ^ (b1 & c))) | 0;
      k = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b1;
      b1 = a;
      a = (t1 + t2) | 0;
    }
    h[0] += a;
    h[1] += b1;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
  }

  update(b) {
    let i = 0;
    this.len += b.length;
    if (this.n > 0) {
      while (this.n < 64 && i < b.length) this.buf[this.n++] = b[i++];
      if (this.n < 64) return;
      this.block(this.buf, 0);
      this.n = 0;
    }
    for (; i + 64 <= b.length; i += 64) this.block(b, i);
    while (i < b.length) this.buf[this.n++] = b[i++];
  }

  hex() {
    const pad = new Uint8Array((this.n < 56 ? 56 : 120) - this.n + 8);
    const bits = this.len * 8;
    const v = new DataView(pad.buffer);
    pad[0] = 0x80;
    v.setUint32(pad.length - 8, Math.floor(bits / 2 ** 32));
    v.setUint32(pad.length - 4, bits >>> 0);
    this.update(pad);
    return Array.from(this.h, (x) => (x >>> 0).toString(16).padStart(8, "0")).join("");
  }
}

// yieldToPage lets the page run between steps of a long computation
// (a message, not a timer: background tabs throttle timers).
function yieldToPage() {
  if (typeof MessageChannel === "undefined") return Promise.resolve();
  return new Promise((resolve) => {
    const c = new MessageChannel();
    c.port1.onmessage = () => {
      c.port1.close();
      resolve();
    };
    c.port2.postMessage(null);
  });
}

// hashParts reads f one part of partBytes at a time (the only memory it
// holds) and returns each part's SHA-256 (SubtleCrypto) and the whole
// file's (Sha256, from the same reads), in hex.
async function hashParts(op, f, partBytes, signal) {
  const whole = new Sha256();
  const parts = [];
  for (let start = 0; start < f.size; start += partBytes) {
    throwIfAborted(op, signal);
    const buf = await f.slice(start, Math.min(f.size, start + partBytes)).arrayBuffer();
    // SubtleCrypto copies the bytes and hashes them off the page's thread.
    const part = crypto.subtle.digest("SHA-256", buf);
    const b = new Uint8Array(buf);
    for (let o = 0; o < b.length; o += HASH_STEP) {
      whole.update(b.subarray(o, o + HASH_STEP));
      await yieldToPage();
      throwIfAborted(op, signal);
    }
    parts.push(hex(await part));
  }
  return { sha256: whole.hex(), parts };
}

/**
 * localResumeStore is the default resume store: localStorage, under keys
 * that start with "pendinguploads.resume:". Where there is no
 * localStorage (a worker, a sandboxed frame), it remembers nothing.
 * Entries older than a day (the bucket drops incomplete uploads by then)
 * are removed whenever one is set.
 */
export const localResumeStore = Object.freeze({
  get(key) {
    const ls = localStorageOrNull();
    const v = ls && ls.getItem(RESUME_PREFIX + key);
    return v ? JSON.parse(v) : null;
  },
  set(key, value) {
    const ls = localStorageOrNull();
    if (!ls) return;
    const old = [];
    for (let i = 0; i < ls.length; i++) {
      const k = ls.key(i);
      if (!k || !k.startsWith(RESUME_PREFIX)) continue;
      let at = NaN;
      try {
        at = Date.parse(JSON.parse(ls.getItem(k)).saved_at);
      } catch {
        // not one of ours to read: dropped as stale
      }
      if (!(Date.now() - at < RESUME_MAX_AGE_MS)) old.push(k);
    }
    for (const k of old) ls.removeItem(k);
    ls.setItem(RESUME_PREFIX + key, JSON.stringify(value));
  },
  delete(key) {
    const ls = localStorageOrNull();
    if (ls) ls.removeItem(RESUME_PREFIX + key);
  },
});

function localStorageOrNull() {
  try {
    return typeof localStorage === "undefined" ? null : localStorage;
  } catch {
    return null; // a sandboxed frame throws on access
  }
}

// resumeKey is the fingerprint under which a file's upload is remembered:
// the workspace and the file's name, size and lastModified. A Blob that is
// not a File has no lastModified and is never remembered.
function resumeKey(workspaceId, f) {
  if (typeof f.lastModified !== "number" || typeof f.name !== "string") return null;
  return JSON.stringify([String(workspaceId), f.name, f.size, f.lastModified]);
}

// The store is best effort: a store that fails (a full or disabled
// localStorage) costs the resume, never the upload.
async function storeGet(store, key) {
  try {
    const v = await store.get(key);
    return v && typeof v === "object" && typeof v.upload_id === "string" ? v : null;
  } catch {
    return null;
  }
}

async function storeSet(store, key, value) {
  try {
    await store.set(key, value);
  } catch {
    // not remembered: a reload starts over
  }
}

async function storeDelete(store, key) {
  try {
    await store.delete(key);
  } catch {
    // a stale entry is dropped when it is next tried
  }
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
 * Large files first: presign, a PUT of each to the bucket (retried) and
 * only then, after the small files' multipart requests (never retried),
 * one commit per 64 large files (retried when its answer was lost: a
 * repeated commit answers with the same files). So an abort or a failure
 * while the large files travel stores nothing at all.
 *
 * A file above the server's multipart_threshold_bytes goes in parts of
 * multipart_part_bytes: first read once, a part at a time, for each
 * part's SHA-256 and the file's (declared at presign: the bucket refuses
 * other bytes); then partsInFlight parts (4) at a time, each part retried
 * on its own. Its upload is remembered in resumeStore (localStorage by
 * default; null: not at all) under a fingerprint of workspaceId and the
 * file's name, size and lastModified, so that a later call with the same
 * file, after a failure or in a reloaded page, sends only the parts the
 * bucket does not hold. The entry is dropped once committed or aborted.
 *
 * onProgress({loaded, total, index, file, fileLoaded, fileTotal}) reports
 * the file bytes sent, over all files (a resumed file starts at the bytes
 * the bucket holds); it ends with loaded === total. It never goes back: a
 * PUT or part that is retried counts again only past where it was.
 *
 * headers (an object, or a function called anew for each request, which
 * may return a promise) go with every request to the service (the
 * token's Authorization and the Content-Type the request needs win over
 * them); credentials is the fetch credentials mode of those
 * requests ("include" by default without a token, "omit" with one). The
 * bucket gets neither: a presigned PUT carries only its signed headers.
 *
 * A transfer (a PUT, a part, a multipart request) during which no byte
 * moves for stallTimeoutMs (default: max(60 s, its bytes / 100 KB/s), the
 * canvas's floor) is given up and retried like a lost connection; when
 * the attempts are spent the call rejects with code "timeout", whose name
 * is "TimeoutError".
 *
 * Aborting signal aborts the requests in flight, drops on the server the
 * uploads this call presigned or resumed (and their resume entries), and
 * rejects with code "aborted"; nothing aborted is ever committed.
 */
export async function uploadFiles(api, token, workspaceId, files, options = {}) {
  const { onProgress, signal, limits, attempts, partsInFlight, resumeStore, stallTimeoutMs } = options;
  const op = "upload";
  const svc = service(op, api, token, workspaceId, options);
  if (stallTimeoutMs !== undefined && !(Number.isFinite(stallTimeoutMs) && stallTimeoutMs > 0)) {
    throw new PendingUploadsError(`${op}: stallTimeoutMs must be a positive number of milliseconds`, { code: "invalid" });
  }
  const list = Array.from(files || []);
  if (list.length === 0) throw new PendingUploadsError(`${op}: no files`, { code: "invalid" });
  for (const f of list) {
    if (typeof Blob === "undefined" || !(f instanceof Blob)) throw new PendingUploadsError(`${op}: every file must be a File or a Blob`, { code: "invalid" });
  }
  const store = resumeStore === undefined ? localResumeStore : resumeStore;
  if (store !== null && (typeof store !== "object" || !["get", "set", "delete"].every((m) => typeof store[m] === "function"))) {
    throw new PendingUploadsError(`${op}: resumeStore must have get, set and delete (or be null)`, { code: "invalid" });
  }
  const inFlight = Math.min(Math.max(1, Math.floor(partsInFlight || DEFAULT_PARTS_IN_FLIGHT)), MAX_PARTS_IN_FLIGHT);
  throwIfAborted(op, signal);
  const lim = limits ? checkLimits(limits) : await getLimits(api, { signal, attempts, headers: options.headers, credentials: svc.credentials });

  const small = [];
  const large = [];
  const inParts = new Set();
  for (let i = 0; i < list.length; i++) {
    const f = list[i];
    const name = fileName(f);
    if (f.size === 0) {
      throw new PendingUploadsError(`${name} is empty (the service takes no empty files)`, { code: "empty", body: { error: "empty file", filename: name } });
    }
    if (f.size > lim.per_file_bytes) {
      throw new PendingUploadsError(`${name} is ${formatBytes(f.size)}, over the limit of ${formatBytes(lim.per_file_bytes)} per file`, {
        code: "too_large",
        body: { error: "file exceeds per-file cap", filename: name, size: f.size, max: lim.per_file_bytes },
      });
    }
    if (multipartSize([f]) <= lim.per_request_bytes) small.push(i);
    else if (lim.presign) {
      large.push(i);
      if (lim.multipart_part_bytes !== null && f.size > lim.multipart_threshold_bytes) inParts.add(i);
    } else {
      throw new PendingUploadsError(`${name} is ${formatBytes(f.size)}, more than one request may carry (${formatBytes(lim.per_request_bytes)}), and this service takes no larger files`, {
        code: "too_large",
        body: { error: "request body too large", max: lim.per_request_bytes },
      });
    }
  }

  // Hash while the bytes travel, one file at a time (each is read whole
  // into memory); checked against the server's answers. A file in parts
  // is hashed part by part before its presign instead (digests[i] is set
  // then; null: unchecked).
  let chain = Promise.resolve();
  const digests = hasDigest() ? list.map((f, i) => (inParts.has(i) ? null : (chain = chain.then(() => sha256Hex(f))))) : null;
  if (digests) digests.forEach((p) => p && p.catch(() => {}));

  const total = list.reduce((s, f) => s + f.size, 0);
  const sent = new Array(list.length).fill(0);
  let loaded = 0;
  // A file's count only grows: bytes sent again (a retried PUT or part)
  // count once they pass where the file was.
  const report = (i, n) => {
    n = Math.min(list[i].size, n);
    if (!(n > sent[i])) return;
    loaded += n - sent[i];
    sent[i] = n;
    if (onProgress) onProgress({ loaded, total, index: i, file: list[i], fileLoaded: n, fileTotal: list[i].size });
  };

  const out = new Array(list.length);
  const staged = () => out.filter(Boolean);
  // The uploads this call presigned or resumed and has not committed,
  // with their resume keys (null: not remembered).
  const open = new Map();
  const forget = async (id) => {
    const key = open.get(id);
    open.delete(id);
    if (key) await storeDelete(store, key);
  };
  const ctx = { ...svc, signal, attempts, stallTimeoutMs };
  try {
    const commits = [];
    for (let s = 0; s < large.length; s += MAX_FILES_PER_REQUEST) {
      const batch = large.slice(s, s + MAX_FILES_PER_REQUEST);
      const ups = new Array(batch.length);
      const declared = new Array(batch.length);
      const keys = batch.map((i) => (store && inParts.has(i) ? resumeKey(workspaceId, list[i]) : null));
      for (let k = 0; k < batch.length; k++) {
        const i = batch[k];
        if (!inParts.has(i)) continue;
        const saved = keys[k] && (await storeGet(store, keys[k]));
        if (saved) {
          // Open from here: an abort while it is taken up drops it.
          open.set(saved.upload_id, keys[k]);
          const r = await resumeSaved(ctx, saved, list[i]);
          if (r.plan) {
            ups[k] = r.plan;
            if (digests) digests[i] = typeof saved.sha256 === "string" ? Promise.resolve(saved.sha256) : null;
            continue;
          }
          open.delete(saved.upload_id);
          if (r.staged) {
            // Committed by an earlier call whose answer was lost.
            out[i] = r.staged;
            if (digests) digests[i] = typeof saved.sha256 === "string" ? Promise.resolve(saved.sha256) : null;
            report(i, list[i].size);
          }
          await storeDelete(store, keys[k]);
          if (r.staged) continue;
        }
        declared[k] = { multipart: true };
        if (digests) {
          const h = await hashParts(`hash ${fileName(list[i])}`, list[i], lim.multipart_part_bytes, signal);
          declared[k].sha256 = h.sha256;
          declared[k].parts = h.parts.map((sha256) => ({ sha256 }));
          digests[i] = Promise.resolve(h.sha256);
        }
      }
      const fresh = [];
      for (let k = 0; k < batch.length; k++) if (!ups[k] && !out[batch[k]]) fresh.push(k);
      if (fresh.length > 0) {
        const got = await presign(ctx, fresh.map((k) => ({ f: list[batch[k]], extra: declared[k] })));
        for (let j = 0; j < fresh.length; j++) {
          const k = fresh[j];
          const up = got[j];
          ups[k] = up;
          const key = up.multipart ? keys[k] : null;
          open.set(up.upload_id, key);
          if (key) {
            await storeSet(store, key, {
              upload_id: up.upload_id,
              part_bytes: up.multipart.part_bytes,
              sha256: declared[k] && declared[k].sha256 ? declared[k].sha256 : null,
              saved_at: new Date().toISOString(),
            });
          }
        }
      }
      const c = { idx: [], ids: [] };
      for (let k = 0; k < batch.length; k++) {
        const i = batch[k];
        if (out[i]) continue;
        const up = ups[k];
        if (up.multipart) {
          try {
            await putParts(ctx, up, list[i], { inFlight, onFileProgress: (n) => report(i, n) });
          } catch (err) {
            // A part the bucket refused (the file changed, say) would be
            // refused again: the upload is dropped, the next call starts
            // over. A part that could not be sent keeps it for a resume.
            if (refusedByBucket.has(err)) {
              await abortUpload(ctx, up.upload_id);
              await forget(up.upload_id);
            }
            throw err;
          }
        } else {
          await putPresigned(ctx, up, list[i], { onUploadProgress: (n) => report(i, n) });
        }
        report(i, list[i].size);
        c.idx.push(i);
        c.ids.push(up.upload_id);
      }
      if (c.ids.length > 0) commits.push(c);
    }
    for (const batch of packBatches(list, small, lim.per_request_bytes)) {
      const got = await postMultipart(ctx, batch.map((i) => list[i]), {
        onBodyProgress: (starts, n) => batch.forEach((i, k) => report(i, n - starts[k])),
      });
      batch.forEach((i, k) => {
        out[i] = got[k];
        report(i, list[i].size);
      });
    }
    for (const c of commits) {
      let got;
      try {
        got = await commit(ctx, c.ids);
      } catch (err) {
        // Not received, after every part went in: what the bucket holds is
        // not the file declared (it changed since its first parts went,
        // and the bucket did not check their checksums). A resume would
        // send nothing: the upload is dropped, the next call starts over.
        const id = err instanceof PendingUploadsError && err.status === 409 && err.body && err.body.error === "upload not received" && err.body.upload_id;
        if (id && open.has(id)) {
          await abortUpload(ctx, id);
          await forget(id);
        }
        throw err;
      }
      c.idx.forEach((i, k) => (out[i] = got[k]));
      for (const id of c.ids) await forget(id);
    }
    if (digests) {
      for (let i = 0; i < list.length; i++) {
        const want = await digests[i];
        if (want && String(out[i].sha256).toLowerCase() !== want) {
          throw new PendingUploadsError(`${op}: ${fileName(list[i])}: the server stored sha256 ${out[i].sha256}, the file has ${want}`, {
            code: "digest_mismatch",
            body: out[i],
          });
        }
      }
    }
  } catch (err) {
    const e = err instanceof PendingUploadsError ? err : new PendingUploadsError(`${op}: ${err && err.message}`, { code: "invalid", cause: err });
    if (signal && signal.aborted && open.size > 0) {
      // Aborted: nothing of it is kept for a resume, on either side.
      await Promise.all(
        Array.from(open.keys(), async (id) => {
          await abortUpload(ctx, id);
          await forget(id);
        }),
      );
    }
    e.staged = staged();
    throw e;
  }
  return { files: out };
}

// presign asks for a presigned upload of each item {f, extra} (extra: the
// multipart fields, or undefined), in order.
async function presign(ctx, items) {
  const op = "presign";
  const json = { files: items.map(({ f, extra }) => ({ name: fileName(f), size: f.size, mimeType: f.type || "", ...extra })) };
  // Safe to repeat: nothing is visible until a commit.
  const v = await withRetries(op, ctx.attempts, ctx.signal, () =>
    serviceJSON(op, ctx, wsURL(ctx.api, ctx.workspaceId, "chat", "uploads", "presign"), { method: "POST", json, signal: ctx.signal }),
  );
  if (!v || !Array.isArray(v.uploads) || v.uploads.length !== items.length) {
    throw new PendingUploadsError(`${op}: the server answered ${v && Array.isArray(v.uploads) ? v.uploads.length : "no"} uploads for ${items.length} files`, { status: 200, body: v, code: "bad_response" });
  }
  items.forEach(({ f }, k) => {
    if (v.uploads[k] && v.uploads[k].multipart) checkPlan(op, v.uploads[k], f);
  });
  return v.uploads;
}

// resumeUpload is POST …/presign/{uploadId}: the plan of a multipart
// upload not committed yet, with fresh URLs for the parts the bucket does
// not hold. Safe to repeat.
async function resumeUpload(ctx, uploadId, signal) {
  const op = "resume";
  return withRetries(op, ctx.attempts, signal, () =>
    serviceJSON(op, ctx, wsURL(ctx.api, ctx.workspaceId, "chat", "uploads", "presign", uploadId), { method: "POST", signal }),
  );
}

// resumeSaved takes up a remembered upload: {plan} to send its missing
// parts, {staged} when an earlier call committed it (its commit, repeated,
// answers the same file), or {} when the server no longer has it (404,
// or any other refusal): the caller starts over.
async function resumeSaved(ctx, saved, f) {
  let plan;
  try {
    plan = await resumeUpload(ctx, saved.upload_id, ctx.signal);
  } catch (err) {
    if (!(err instanceof PendingUploadsError) || err.code === "aborted" || retryable(err) || err.status === 401 || err.status === 403) throw err;
    if (err.status === 409) {
      const got = await commit(ctx, [saved.upload_id]);
      return { staged: got[0] };
    }
    return {};
  }
  try {
    checkPlan("resume", plan, f);
  } catch {
    // Not this file's upload after all (another file, same fingerprint).
    await abortUpload(ctx, saved.upload_id);
    return {};
  }
  return { plan };
}

// abortUpload is DELETE …/presign/{uploadId}, best effort and bounded
// (ABORT_TIMEOUT_MS), never under the caller's signal: it runs because
// that signal fired. An upload the server no longer has, or committed
// (409), is left as it is.
async function abortUpload(ctx, uploadId) {
  const op = "abort";
  try {
    await serviceJSON(op, ctx, wsURL(ctx.api, ctx.workspaceId, "chat", "uploads", "presign", uploadId), { method: "DELETE", timeoutMs: ABORT_TIMEOUT_MS });
  } catch {
    // the bucket's lifecycle rule aborts it within a day
  }
}

// checkPlan checks a multipart plan against f: part_count parts of
// part_bytes (the last shorter), each part to send of its size, with a
// URL. It returns the plan.
function checkPlan(op, up, f) {
  const m = up && up.multipart;
  const n = (x) => Number.isSafeInteger(x) && x > 0;
  const bad = (why) => new PendingUploadsError(`${op}: ${fileName(f)}: ${why}`, { status: 200, body: up, code: "bad_response" });
  if (typeof up.upload_id !== "string" || !m || !n(m.part_bytes) || !n(m.part_count) || !Array.isArray(m.received) || !Array.isArray(m.parts)) {
    throw bad("not a multipart plan");
  }
  if (m.part_count !== Math.ceil(f.size / m.part_bytes)) throw bad(`${m.part_count} parts of ${m.part_bytes} bytes for ${f.size} bytes`);
  const seen = new Set();
  for (const p of m.parts) {
    const want = n(p && p.part_number) && p.part_number <= m.part_count ? Math.min(m.part_bytes, f.size - (p.part_number - 1) * m.part_bytes) : -1;
    if (want < 0 || p.size !== want || typeof p.url !== "string" || seen.has(p.part_number)) throw bad(`part ${p && p.part_number}: not one this file has`);
    seen.add(p.part_number);
  }
  return m;
}

// refusedByBucket holds the errors of parts the bucket answered with a
// refusal (4xx but 408 and 429): sending them again would not help.
const refusedByBucket = new WeakSet();

function bucketError(op, r) {
  const m = /<Code>([^<]{1,64})<\/Code>/.exec(r.text || "");
  const s3code = m ? m[1] : "";
  // S3's word for bytes that do not match the declared checksum.
  const code = /BadDigest|ChecksumMismatch|SHA256Mismatch/i.test(s3code) ? "digest_mismatch" : "http";
  const answer = `${r.status}${s3code ? ` ${s3code}` : ""}`;
  let msg;
  if (code === "digest_mismatch") msg = `the file storage refused the bytes: they are not the ones declared (${answer}; did the file change while it was sent?) [${op}]`;
  else if (r.status >= 500 || r.status === 429 || r.status === 408) msg = `the file storage is unavailable right now (${answer}); try again in a moment [${op}]`;
  else msg = `the file storage refused the upload (${answer}) [${op}]`;
  const e = new PendingUploadsError(msg, { status: r.status, code, body: s3code ? { code: s3code } : null });
  if (r.status >= 400 && r.status < 500 && r.status !== 408 && r.status !== 429) refusedByBucket.add(e);
  return e;
}

// partDeadline is when the URLs of a plan expiring at expiresAt (the
// server's clock; this one may be off) should no longer start a PUT.
function partDeadline(expiresAt) {
  const left = Date.parse(expiresAt) - Date.now();
  const ttl = Number.isFinite(left) ? Math.min(Math.max(left, 2 * PART_URL_MARGIN_MS), PART_URL_TTL_MS) : PART_URL_TTL_MS;
  return Date.now() + ttl - PART_URL_MARGIN_MS;
}

// putParts sends the parts of f that up's plan lists, inFlight at a time,
// each with exactly its presigned headers (less Content-Length) and no
// credentials, each read again from f as a slice (never the whole file).
// A part is retried on its own; when one fails for good the others are
// stopped. URLs about to expire (or refused with 403 once) are renewed by
// a resume, which also drops parts the bucket turns out to hold.
// onFileProgress gets the file's bytes: those the bucket held at the
// start plus those of the parts in flight.
async function putParts(ctx, up, f, { inFlight, onFileProgress }) {
  const op = `put ${fileName(f)}`;
  const m = checkPlan(op, up, f);
  const partBytes = m.part_bytes;
  const urls = new Map(m.parts.map((p) => [p.part_number, p]));
  let deadline = partDeadline(up.expires_at);
  let held = f.size - m.parts.reduce((s, p) => s + p.size, 0);
  const moving = new Map();
  const emit = () => {
    let n = held;
    for (const v of moving.values()) n += v;
    onFileProgress(n);
  };
  emit();

  // ctl stops every part: the caller's abort, or one part failing.
  const ctl = new AbortController();
  const outer = ctx.signal;
  const onAbort = () => ctl.abort(outer.reason);
  if (outer) {
    if (outer.aborted) ctl.abort(outer.reason);
    else outer.addEventListener("abort", onAbort, { once: true });
  }
  let renewing = null;
  const renew = () =>
    (renewing ??= (async () => {
      try {
        const r = await resumeUpload(ctx, up.upload_id, ctl.signal);
        const fresh = checkPlan("resume", r, f);
        const missing = new Set(fresh.parts.map((p) => p.part_number));
        for (const p of fresh.parts) urls.set(p.part_number, p);
        for (const num of urls.keys()) if (!missing.has(num)) urls.delete(num);
        deadline = partDeadline(r.expires_at);
      } finally {
        renewing = null;
      }
    })());

  const sendPart = (num) => {
    const start = (num - 1) * partBytes;
    const partOp = `${op} part ${num}`;
    let renewed = false;
    return withRetries(partOp, ctx.attempts, ctl.signal, async () => {
      if (Date.now() > deadline) await renew();
      const put = async () => {
        const p = urls.get(num);
        if (!p) return null; // the bucket holds it already
        moving.set(num, 0);
        emit();
        return xhrSend(partOp, {
          method: p.method || "PUT",
          url: p.url,
          headers: p.headers,
          body: f.slice(start, start + p.size),
          signal: ctl.signal,
          timeoutMs: PUT_TIMEOUT_MS,
          stallMs: stallLimit(ctx.stallTimeoutMs, p.size),
          peer: "bucket",
          onUploadProgress: (n) => {
            moving.set(num, Math.min(n, p.size));
            emit();
          },
        });
      };
      let r;
      try {
        r = await put();
        if (r && r.status === 403 && !renewed) {
          // Expired (a slow start, a clock off): fresh URLs, once.
          renewed = true;
          await renew();
          r = await put();
        }
      } catch (err) {
        moving.set(num, 0);
        throw err;
      }
      if (r && (r.status < 200 || r.status > 299)) {
        moving.set(num, 0);
        throw bucketError(partOp, r);
      }
      moving.delete(num);
      held += Math.min(partBytes, f.size - start);
      emit();
    });
  };

  const queue = m.parts.map((p) => p.part_number);
  let failed = null;
  const worker = async () => {
    while (queue.length > 0 && !failed) {
      const num = queue.shift();
      try {
        await sendPart(num);
      } catch (err) {
        moving.delete(num);
        if (!failed) {
          failed = err;
          ctl.abort();
        }
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(inFlight, queue.length) }, worker));
  } finally {
    if (outer) outer.removeEventListener("abort", onAbort);
  }
  if (outer && outer.aborted) throw abortedError(op, outer);
  if (failed) throw failed;
}

// putPresigned sends f to the bucket with exactly the presigned method,
// URL and headers (less Content-Length, which the browser sets from the
// body), no Authorization. Retried: the same bytes to the same key.
async function putPresigned(ctx, up, f, { onUploadProgress }) {
  const { signal, attempts } = ctx;
  const op = `put ${fileName(f)}`;
  const headers = up.headers || {};
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === "content-length" && String(v) !== String(f.size)) {
      throw new PendingUploadsError(`${op}: presigned for ${v} bytes, the file has ${f.size}`, { code: "bad_response", body: up });
    }
  }
  await withRetries(op, attempts, signal, async () => {
    onUploadProgress(0);
    const r = await xhrSend(op, {
      method: up.method || "PUT",
      url: up.url,
      headers,
      body: f,
      signal,
      timeoutMs: PUT_TIMEOUT_MS,
      stallMs: stallLimit(ctx.stallTimeoutMs, f.size),
      peer: "bucket",
      onUploadProgress,
    });
    if (r.status < 200 || r.status > 299) throw bucketError(op, r);
  });
}

// postMultipart stages files in one multipart request: all or nothing.
// Never retried: when the answer is lost, the files may be stored.
async function postMultipart(ctx, files, { onBodyProgress }) {
  const op = "upload";
  const boundary = randomBoundary();
  const mb = layoutMultipart(files, boundary);
  const r = await xhrSend(op, {
    method: "POST",
    url: wsURL(ctx.api, ctx.workspaceId, "chat", "uploads"),
    headers: await serviceHeaders(op, ctx, { "Content-Type": `multipart/form-data; boundary=${boundary}` }),
    withCredentials: ctx.credentials === "include",
    body: new Blob(mb.parts),
    signal: ctx.signal,
    timeoutMs: MULTIPART_TIMEOUT_MS,
    stallMs: stallLimit(ctx.stallTimeoutMs, mb.size),
    peer: "service",
    onUploadProgress: (n) => onBodyProgress(mb.starts, n),
  });
  if (r.status < 200 || r.status > 299) throw httpError(op, r.status, r.text);
  return stagedList(op, parseJSONText(op, r.status, r.text), files.length);
}

// commit stages presigned uploads (form B). Retried when no answer came
// or the server failed (5xx): a commit whose uploads were all committed
// before answers 200 with the same files. A 409 is not retried.
async function commit(ctx, ids) {
  const op = "commit";
  const json = { files: ids.map((id) => ({ upload_id: id })) };
  const v = await withRetries(op, ctx.attempts, ctx.signal, () =>
    serviceJSON(op, ctx, wsURL(ctx.api, ctx.workspaceId, "chat", "uploads"), { method: "POST", json, signal: ctx.signal }),
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
 * SubtleCrypto; null when neither). headers and credentials as
 * uploadFiles takes them.
 */
export async function downloadFile(api, token, workspaceId, fileId, { signal, headers, credentials } = {}) {
  const op = "download";
  const svc = service(op, api, token, workspaceId, { headers, credentials });
  const r = await request(op, wsURL(api, workspaceId, "pending-uploads", fileId, "content"), {
    headers: await serviceHeaders(op, svc),
    credentials: svc.credentials,
    signal,
    timeoutMs: DOWNLOAD_TIMEOUT_MS,
  });
  let blob;
  try {
    blob = await r.resp.blob();
  } catch (err) {
    if (signal && signal.aborted) throw abortedError(op, signal);
    if (r.timedOut()) throw timeoutError(op, `not received within ${seconds(DOWNLOAD_TIMEOUT_MS)}`, err);
    throw new PendingUploadsError(`the download was cut off [${op}]`, { code: "network", cause: err });
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
 * sweep took the row meanwhile). headers and credentials as uploadFiles
 * takes them.
 */
export async function ack(api, token, workspaceId, fileId, { signal, attempts, headers, credentials } = {}) {
  const op = "ack";
  const svc = service(op, api, token, workspaceId, { headers, credentials });
  return withRetries(op, attempts, signal, () =>
    serviceJSON(op, svc, wsURL(api, workspaceId, "pending-uploads", fileId, "ack"), { method: "POST", signal }),
  );
}
