// pendinguploads browser client: stages files for a workspace the way the
// Go client does. Small files travel together as one multipart request;
// files too large for one request (a Lambda takes about 4 MiB) go through
// presign, a PUT straight to the bucket, and a JSON commit; files above
// the server's multipart threshold go to the bucket in parts, a few at a
// time, and resume after a lost connection or a reloaded page. No
// dependencies, no build step: ES modules for browsers (and any runtime
// with fetch and Blob: node 20 and later, whose transfers go by fetch),
// imported through this one.
//
// The modules beside it, each with one purpose:
//   errors.js     PendingUploadsError; the service's answers read by code
//   http.js       requests to the service, transfers with progress, retries
//   limits.js     GET /uploads/limits and DEFAULT_LIMITS
//   sha256.js     SubtleCrypto's digest and an incremental SHA-256
//   multipart.js  small files in one multipart/form-data request
//   presign.js    presign, one PUT to the bucket, commit, abort
//   parts.js      files in parts: the plan, parts in flight, the resume
//   upload.js     uploadFiles: which file goes how, in which order
//   download.js   downloadFile, openFile (a download link, the browser's
//                 download manager) and ack
//   scan.js       scanStates, whenScanned: a file's malware scan, the
//                 sender's side
//   attachment.js pendingFile: an attachment URI of the service read

export { PendingUploadsError } from "./errors.js";
export { DEFAULT_LIMITS, getLimits } from "./limits.js";
export { localResumeStore } from "./parts.js";
export { uploadFiles } from "./upload.js";
export { downloadFile, openFile, ack } from "./download.js";
export { scanStates, whenScanned } from "./scan.js";
export { pendingFile } from "./attachment.js";
