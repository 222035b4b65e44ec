// The workspace's side: downloadFile fetches a staged file's bytes
// (checked against Repr-Digest), ack acknowledges it; openFile hands a
// file to the browser's own download manager through a download link.

import { PendingUploadsError, abortedError, seconds, timeoutError } from "./errors.js";
import { request, service, serviceHeaders, serviceJSON, stallLimit, withRetries, wsURL } from "./http.js";
import { hasDigest, sha256Hex } from "./sha256.js";

// downloadFile's transfer is bounded by its stall limit, not by a
// deadline: a slow link that moves is never cut.
const NO_DEADLINE_MS = 24 * 3600_000;

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
 * Fetches a staged file's bytes into the page (a Blob). When the answer
 * carries the whole file's digest (Repr-Digest, sha-256; from a server
 * before Repr-Digest, the Content-Digest of its 200) and the browser has
 * SubtleCrypto, the bytes are checked against it (mismatch: code
 * "digest_mismatch"). sha256
 * is the hex digest of the bytes received (or the header's, unchecked,
 * without SubtleCrypto; null when neither). headers and credentials as
 * uploadFiles takes them. Like an upload, it is given up (code "timeout",
 * name TimeoutError) when no byte moves for stallTimeoutMs (default
 * max(60 s, the file's bytes / 100 KB/s)), never for a slow link that
 * moves; onProgress({loaded, total}) follows the bytes. To save a large
 * file, openFile keeps it out of the page altogether.
 */
export async function downloadFile(api, token, workspaceId, fileId, { signal, headers, credentials, stallTimeoutMs, onProgress } = {}) {
  const op = "download";
  const svc = service(op, api, token, workspaceId, { headers, credentials });
  // stop aborts the fetch: the caller's signal, or a stall.
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal.reason);
  if (signal) {
    if (signal.aborted) stop.abort(signal.reason);
    else signal.addEventListener("abort", onAbort, { once: true });
  }
  let stalled = false;
  let timer;
  let limit = stallLimit(stallTimeoutMs, 0);
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      stalled = true;
      stop.abort();
    }, limit);
  };
  // One timer for the whole transfer, the answer's headers included:
  // request's own deadline is set past it.
  let r;
  arm();
  try {
    r = await request(op, wsURL(api, workspaceId, "pending-uploads", fileId, "content"), {
      headers: await serviceHeaders(op, svc),
      credentials: svc.credentials,
      signal: stop.signal,
      timeoutMs: NO_DEADLINE_MS,
    });
  } catch (err) {
    clearTimeout(timer);
    if (signal) signal.removeEventListener("abort", onAbort);
    if (signal && signal.aborted) throw abortedError(op, signal);
    if (stalled) throw timeoutError(op, `no answer within ${seconds(limit)}`, err);
    throw err;
  }
  const h = r.resp.headers;
  const ctype = (h.get("Content-Type") || "application/octet-stream").split(";")[0].trim();
  const total = Number(h.get("Content-Length")) || 0;
  let blob;
  try {
    limit = stallLimit(stallTimeoutMs, total);
    arm();
    blob = await readBody(r.resp, ctype, total, () => arm(), onProgress);
  } catch (err) {
    if (signal && signal.aborted) throw abortedError(op, signal);
    if (stalled) throw timeoutError(op, `no byte moved for ${seconds(limit)}`, err);
    throw new PendingUploadsError(`the download was cut off [${op}]`, { code: "network", cause: err });
  } finally {
    clearTimeout(timer);
    if (signal) signal.removeEventListener("abort", onAbort);
    r.done();
  }
  const { field, declared } = wholeDigest(r.resp);
  let sha256 = declared;
  if (hasDigest()) {
    sha256 = await sha256Hex(blob);
    if (declared && declared !== sha256) {
      throw new PendingUploadsError(`${op}: ${field} says sha256 ${declared}, the bytes have ${sha256}`, { status: r.resp.status, code: "digest_mismatch" });
    }
  }
  return { blob, name: dispositionName(h.get("Content-Disposition")), mimeType: ctype, size: blob.size, sha256 };
}

// wholeDigest is the whole file's SHA-256 (hex) that resp declares, and
// the field it came from: Repr-Digest (RFC 9530), on a 200 or a 206; on
// a 200 without it (a server before Repr-Digest), Content-Digest, then
// the whole file's too. A 206's Content-Digest is its range's: never read.
function wholeDigest(resp) {
  let field = "Repr-Digest";
  let v = resp.headers.get(field);
  if (!v && resp.status === 200) {
    field = "Content-Digest";
    v = resp.headers.get(field);
  }
  const m = /sha-256=:([A-Za-z0-9+/=]+):/i.exec(v || "");
  return { field, declared: m ? base64ToHex(m[1]) : null };
}

// readBody reads resp's body chunk by chunk into a Blob of type,
// calling moved after each chunk (the stall timer) and onProgress with
// the bytes so far.
async function readBody(resp, type, total, moved, onProgress) {
  if (!resp.body || !resp.body.getReader) return resp.blob();
  const reader = resp.body.getReader();
  const chunks = [];
  let loaded = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    moved();
    if (onProgress) onProgress({ loaded, total });
  }
  return new Blob(chunks, { type });
}

/**
 * Opens a staged file in the browser's own download manager, never in
 * the page's memory: asks the service for a download link to it (POST
 * …/link, with headers and credentials as uploadFiles takes them, retried
 * when no answer came) and navigates a hidden anchor to the link, which
 * opens with a bare GET (no header, no cookie). The browser then streams
 * the file to disk, shows its progress, and resumes a cut download while
 * the link lasts. Resolves with {url, expiresAt} once the navigation is
 * started; the download itself is the browser's. Without a document (a
 * worker, node) navigate defaults to false: it only returns the link.
 */
export async function openFile(api, token, workspaceId, fileId, { signal, headers, credentials, attempts, navigate = typeof document !== "undefined" } = {}) {
  const op = "open";
  const svc = service(op, api, token, workspaceId, { headers, credentials });
  const linkURL = wsURL(api, workspaceId, "pending-uploads", fileId, "link");
  const answer = await withRetries(op, attempts, signal, () => serviceJSON(op, svc, linkURL, { method: "POST", signal }));
  if (!answer || typeof answer.url !== "string") {
    throw new PendingUploadsError(`${op}: the answer has no url`, { code: "bad_response" });
  }
  // The link is relative to the link route's own URL (API.md), itself
  // relative to the page when api is "" (the platform's edge).
  const base = typeof document !== "undefined" ? document.baseURI : globalThis.location && globalThis.location.href;
  const url = new URL(answer.url, new URL(linkURL, base)).href;
  if (navigate) {
    const a = document.createElement("a");
    a.href = url;
    a.rel = "noreferrer";
    a.style.display = "none";
    document.body.appendChild(a);
    try {
      a.click();
    } finally {
      a.remove();
    }
  }
  return { url, expiresAt: answer.expires_at };
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
