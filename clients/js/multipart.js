// The multipart form (form A): small files together in one
// multipart/form-data request to the upload route, laid out with exact
// byte offsets for progress, packed into requests under the server's cap.

import { PendingUploadsError, httpError } from "./errors.js";
import { parseJSONText, serviceHeaders, stallLimit, wsURL, transfer } from "./http.js";
import { MAX_FILES_PER_REQUEST } from "./limits.js";

// A multipart body is at most per_request_bytes (4 MiB by default).
const MULTIPART_TIMEOUT_MS = 5 * 60_000;

const enc = new TextEncoder();

function randomBoundary() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return "pendinguploads-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function dropControls(s) {
  return s.replace(/[\u0000-\u001f\u007f]/g, "_");
}

// fileName is the name f goes by: its own, or "file" for a Blob without
// one.
export function fileName(f) {
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

export function multipartSize(files) {
  // The boundary has a fixed length, so any one gives the size.
  return layoutMultipart(files, randomBoundary()).size;
}

// packBatches groups the indexes idx (each fits alone) into requests of
// at most limit bytes and 64 files, in order.
export function packBatches(files, idx, limit) {
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

// stagedList is the files of an upload route's answer (a multipart
// request's or a commit's), checked to be one per file sent.
export function stagedList(op, v, n) {
  if (!v || !Array.isArray(v.files) || v.files.length !== n) {
    throw new PendingUploadsError(`${op}: the server answered ${v && Array.isArray(v.files) ? v.files.length : "no"} files for ${n} sent`, { status: 200, body: v, code: "bad_response" });
  }
  return v.files;
}

// postMultipart stages files in one multipart request: all or nothing.
// Never retried: when the answer is lost, the files may be stored.
export async function postMultipart(ctx, files, { onBodyProgress }) {
  const op = "upload";
  const boundary = randomBoundary();
  const mb = layoutMultipart(files, boundary);
  const r = await transfer(op, {
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
  if (r.status < 200 || r.status > 299) throw httpError(op, r.status, r.text, r.retryAfter);
  return stagedList(op, parseJSONText(op, r.status, r.text), files.length);
}
