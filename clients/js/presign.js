// The presigned form (form B): presign asks the service for a URL per
// large file, putPresigned sends a file to the bucket in one PUT, commit
// stages what went in, abortUpload drops what will not be committed.
// Files in parts go through parts.js between presign and commit.

import { PendingUploadsError, UPLOAD_NOT_RECEIVED, bucketError, serviceCode } from "./errors.js";
import { serviceJSON, stallLimit, withRetries, wsURL, transfer } from "./http.js";
import { fileName, stagedList } from "./multipart.js";

// A presigned PUT is valid 15 minutes; no single attempt outlives that.
export const PUT_TIMEOUT_MS = 15 * 60_000;
// Dropping an aborted upload on the server takes at most this.
const ABORT_TIMEOUT_MS = 10_000;

// presign asks for a presigned upload of each item {f, extra} (extra: the
// multipart fields, or undefined), in order. The plans of the uploads in
// parts are the caller's to check (checkPlan).
export async function presign(ctx, items) {
  const op = "presign";
  const json = { files: items.map(({ f, extra }) => ({ name: fileName(f), size: f.size, mimeType: f.type || "", ...extra })) };
  // Safe to repeat: nothing is visible until a commit.
  const v = await withRetries(op, ctx.attempts, ctx.signal, () =>
    serviceJSON(op, ctx, wsURL(ctx.api, ctx.workspaceId, "chat", "uploads", "presign"), { method: "POST", json, signal: ctx.signal }),
  );
  if (!v || !Array.isArray(v.uploads) || v.uploads.length !== items.length) {
    throw new PendingUploadsError(`${op}: the server answered ${v && Array.isArray(v.uploads) ? v.uploads.length : "no"} uploads for ${items.length} files`, { status: 200, body: v, code: "bad_response" });
  }
  return v.uploads;
}

// putPresigned sends f to the bucket with exactly the presigned method,
// URL and headers (less Content-Length, which the browser sets from the
// body), no Authorization. Retried: the same bytes to the same key.
export async function putPresigned(ctx, up, f, { onUploadProgress }) {
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
    const r = await transfer(op, {
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

// commit stages presigned uploads (form B). Retried when no answer came
// or the server failed (5xx): a commit whose uploads were all committed
// before answers 200 with the same files. A 409 is not retried.
export async function commit(ctx, ids) {
  const op = "commit";
  const json = { files: ids.map((id) => ({ upload_id: id })) };
  const v = await withRetries(op, ctx.attempts, ctx.signal, () =>
    serviceJSON(op, ctx, wsURL(ctx.api, ctx.workspaceId, "chat", "uploads"), { method: "POST", json, signal: ctx.signal }),
  );
  return stagedList(op, v, ids.length);
}

// notReceived is the upload named by a commit's refusal err when the
// bucket does not hold that upload's bytes as declared (code
// upload_not_received: the file changed after its first parts went),
// else null. A server older than codes says so with a 409 that names an
// upload and no quota.
export function notReceived(err) {
  if (serviceCode(err, { 409: UPLOAD_NOT_RECEIVED }) !== UPLOAD_NOT_RECEIVED) return null;
  const id = err.body && err.body.upload_id;
  return typeof id === "string" && id !== "" ? id : null;
}

// abortUpload is DELETE …/presign/{uploadId}, best effort and bounded
// (ABORT_TIMEOUT_MS), never under the caller's signal: it runs because
// that signal fired. An upload the server no longer has, or committed
// (409), is left as it is.
export async function abortUpload(ctx, uploadId) {
  const op = "abort";
  try {
    await serviceJSON(op, ctx, wsURL(ctx.api, ctx.workspaceId, "chat", "uploads", "presign", uploadId), { method: "DELETE", timeoutMs: ABORT_TIMEOUT_MS });
  } catch {
    // the bucket's lifecycle rule aborts it within a day
  }
}
