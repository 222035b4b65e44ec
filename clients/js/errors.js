// The client's one error, PendingUploadsError, and the sentences it says:
// how an answer of the service becomes one, read by the answer's code
// (docs/API.md's table of error codes) and never by its message, which
// the service may reword.

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
 * retryAfterMs is how long the service's 503 or 429 asked to wait
 * before the request is sent again (its Retry-After, in delta-seconds,
 * as milliseconds); null when it asked nothing, or gave an HTTP-date
 * (ignored: the service never sends one, and a client's clock may be
 * off), and for every other error.
 */
export class PendingUploadsError extends Error {
  constructor(message, { status = 0, body = null, code = "http", cause, staged = [], retryAfterMs = null } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    const timedOut = code === "timeout" || (code === "aborted" && cause != null && cause.name === "TimeoutError");
    this.name = timedOut ? "TimeoutError" : "PendingUploadsError";
    this.status = status;
    this.body = body;
    this.code = code;
    this.staged = staged;
    this.retryAfterMs = retryAfterMs;
  }
}

// The codes of the service's error answers that this client acts on
// (docs/API.md, "Error codes"; wire.Code in Go).
export const QUOTA_EXCEEDED = "quota_exceeded";
export const FILE_TOO_LARGE = "file_too_large";
export const REQUEST_TOO_LARGE = "request_too_large";
export const UPLOAD_NOT_RECEIVED = "upload_not_received";
export const UPLOAD_COMMITTED = "upload_committed";

// Error bodies are read for their code and message, never without bound.
const MAX_ERROR_BODY = 64 * 1024;

// answerCode is the code of the service's error answer: its body's
// "code". A server older than codes sends none; its answer is read by
// status and the fields it carries (never by its message): a 409 naming
// a quota is quota_exceeded, a 413 naming a size is file_too_large, one
// naming only its max request_too_large, and any other status means what
// older says for the route at hand ({409: UPLOAD_COMMITTED}, say). ""
// when neither tells.
export function answerCode(status, body, older = {}) {
  if (body && typeof body.code === "string" && body.code !== "") return body.code;
  if (status === 409 && body && typeof body.quota === "string") return QUOTA_EXCEEDED;
  if (status === 413 && body && Number.isFinite(body.max)) {
    return typeof body.filename === "string" && Number.isFinite(body.size) ? FILE_TOO_LARGE : REQUEST_TOO_LARGE;
  }
  return older[status] || "";
}

// serviceCode is answerCode of the service's answer err carries, "" for
// an error that is no answer of the service's (no status, or not a
// PendingUploadsError).
export function serviceCode(err, older) {
  if (!(err instanceof PendingUploadsError) || err.status === 0) return "";
  return answerCode(err.status, err.body, older);
}

// formatBytes names a size for a person: "100 MiB", "4.5 MiB", "300 KiB".
export function formatBytes(n) {
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

// seconds names a duration for a person.
export function seconds(ms) {
  return `${(ms / 1000).toFixed(ms < 10_000 && ms % 1000 !== 0 ? 1 : 0)} s`;
}

// abortedError is op's error when the caller's signal fired: code
// "aborted", named TimeoutError when the signal's reason is one.
export function abortedError(op, signal) {
  return new PendingUploadsError(`${op}: aborted`, { code: "aborted", cause: signal && signal.reason });
}

export function throwIfAborted(op, signal) {
  if (signal && signal.aborted) throw abortedError(op, signal);
}

// networkError is op's error when peer ("bucket" or "service") gave no
// answer: the connection failed, or CORS kept the answer from the page.
export function networkError(op, peer, cause) {
  const m =
    peer === "bucket"
      ? "could not reach the file storage (the connection failed, or its CORS rule does not allow this page)"
      : "could not reach the upload service (the connection failed, or its CORS does not allow this page)";
  return new PendingUploadsError(`${m} [${op}]`, { code: "network", cause });
}

// timeoutError is op's error when what (a stall, a deadline) cut it.
export function timeoutError(op, what, cause) {
  return new PendingUploadsError(`${what}: the connection is too slow or has stopped [${op}]`, { code: "timeout", cause });
}

function parseErrorBody(text) {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" ? v : null;
  } catch {
    return null;
  }
}

// quotaSentence says which quota a refused upload would pass, from the
// fields of the answer (quota, limit, pending, adding).
function quotaSentence(body) {
  if (typeof body.quota !== "string") {
    return "the workspace has as much waiting as it may; it takes more once the workspace fetches and acknowledges what waits";
  }
  const files = body.quota === "pending_files";
  const amount = (n) => (files ? `${n} ${n === 1 ? "file" : "files"}` : formatBytes(n));
  return (
    `the workspace has ${amount(body.pending)} waiting, and this upload (${amount(body.adding)}) would pass its limit of ${amount(body.limit)}; ` +
    "it takes more once the workspace fetches and acknowledges what waits"
  );
}

// Retry-After values past this are read as this: a day (the service
// asks for 1 or 5 seconds; withRetries waits far less than this anyway).
const MAX_RETRY_AFTER_S = 86_400;

// retryAfterMs reads a Retry-After header's value (null when absent): its
// delta-seconds as milliseconds, at most a day; null for an HTTP-date or
// anything else that is not whole seconds.
export function retryAfterMs(value) {
  const m = /^\s*(\d{1,10})\s*$/.exec(value == null ? "" : String(value));
  return m ? Math.min(Number(m[1]), MAX_RETRY_AFTER_S) * 1000 : null;
}

// httpError is the PendingUploadsError of the service's answer of status
// with body text: its code says which sentence (the quota, the per-file
// cap, the request cap), its status the rest (signed out, unavailable).
// retryAfter is the answer's Retry-After header (null when none), carried
// as retryAfterMs on a 503's or 429's error.
export function httpError(op, status, text, retryAfter = null) {
  const body = parseErrorBody(String(text || "").slice(0, MAX_ERROR_BODY));
  const msg = body && typeof body.error === "string" ? body.error : `HTTP ${status}`;
  const code = answerCode(status, body);
  if (code === QUOTA_EXCEEDED) {
    // The workspace's mailbox is full: nothing was stored.
    return new PendingUploadsError(quotaSentence(body), { status, body, code: "quota_exceeded" });
  }
  if ((code === FILE_TOO_LARGE || code === REQUEST_TOO_LARGE) && Number.isFinite(body.max)) {
    const m =
      code === FILE_TOO_LARGE && typeof body.filename === "string" && Number.isFinite(body.size)
        ? `${body.filename} is ${formatBytes(body.size)}, over the limit of ${formatBytes(body.max)} per file`
        : `the request is over the ${formatBytes(body.max)} one request may carry`;
    return new PendingUploadsError(m, { status, body, code: "too_large" });
  }
  if (status === 401) {
    return new PendingUploadsError(`not signed in, or the session has expired (${status}: ${msg})`, { status, body, code: "http" });
  }
  if (status >= 500 || status === 429) {
    const wait = status === 503 || status === 429 ? retryAfterMs(retryAfter) : null;
    return new PendingUploadsError(`the upload service is unavailable right now (${status}: ${msg}); try again in a moment`, { status, body, code: "http", retryAfterMs: wait });
  }
  return new PendingUploadsError(`${op}: ${msg} (${status})`, { status, body, code: "http" });
}

// refusedByBucket holds the errors of transfers the bucket answered with
// a refusal (4xx but 408 and 429): sending them again would not help.
export const refusedByBucket = new WeakSet();

// bucketError is the PendingUploadsError of the bucket's answer r
// ({status, text}), read by S3's <Code>: digest_mismatch for bytes that
// are not the ones declared.
export function bucketError(op, r) {
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
