// The workspace's side: downloadFile fetches a staged file's bytes
// (checked against Content-Digest), ack acknowledges it.

import { PendingUploadsError, abortedError, seconds, timeoutError } from "./errors.js";
import { request, service, serviceHeaders, serviceJSON, withRetries, wsURL } from "./http.js";
import { hasDigest, sha256Hex } from "./sha256.js";

const DOWNLOAD_TIMEOUT_MS = 15 * 60_000;

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
