// Page side of the browser test: makes files of known content, calls the
// client module as the canvas would, and returns plain JSON for the Go
// test to check. The Go test computes the same bytes (see pattern in
// browser_test.go).
import * as pu from "./pendinguploads.js";

// pattern returns size bytes of xorshift32 output from seed, each word
// little-endian: the same function as the Go test's pattern.
export function pattern(size, seed) {
  const out = new Uint8Array(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i += 4) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    for (let k = 0; k < 4 && i + k < size; k++) out[i + k] = (x >>> (8 * k)) & 0xff;
  }
  return out;
}

function makeFile(f) {
  return new File([pattern(f.size, f.seed)], f.name, { type: f.type || "" });
}

function errorJSON(e) {
  return {
    name: e && e.name,
    isPendingUploadsError: e instanceof pu.PendingUploadsError,
    code: e && e.code,
    status: e && e.status,
    message: e && e.message,
    staged: (e && e.staged) || [],
  };
}

function secure() {
  return { isSecureContext: window.isSecureContext, subtle: !!(crypto && crypto.subtle) };
}

// upload stages files and follows the progress events; then downloads
// the ones at most downloadMax bytes back and compares them.
export async function upload({ api, token, ws, files, downloadMax }) {
  const blobs = files.map(makeFile);
  const progress = { count: 0, backwards: false, last: null, fileLoaded: {} };
  let res;
  try {
    res = await pu.uploadFiles(api, token, ws, blobs, {
      onProgress(p) {
        progress.count++;
        if (progress.last && p.loaded < progress.last.loaded) progress.backwards = true;
        progress.last = { loaded: p.loaded, total: p.total };
        progress.fileLoaded[p.index] = p.fileLoaded;
      },
    });
  } catch (e) {
    return { ok: false, error: errorJSON(e), progress, ...secure() };
  }
  const downloads = [];
  for (let i = 0; i < files.length; i++) {
    if (files[i].size > downloadMax) continue;
    try {
      const d = await pu.downloadFile(api, token, ws, res.files[i].file_id);
      const got = new Uint8Array(await d.blob.arrayBuffer());
      const want = pattern(files[i].size, files[i].seed);
      const same = got.length === want.length && got.every((b, k) => b === want[k]);
      downloads.push({ index: i, name: d.name, mimeType: d.mimeType, size: d.size, sha256: d.sha256, same });
    } catch (e) {
      downloads.push({ index: i, error: errorJSON(e) });
    }
  }
  return { ok: true, result: res, progress, downloads, ...secure() };
}

// abortMidPut aborts the upload of one large file once its PUT has sent
// at least abortAt bytes (and not all of them).
export async function abortMidPut({ api, token, ws, file, abortAt }) {
  const ctl = new AbortController();
  let abortedAt = -1;
  let total = 0;
  try {
    const res = await pu.uploadFiles(api, token, ws, [makeFile(file)], {
      signal: ctl.signal,
      onProgress(p) {
        total = p.total;
        if (abortedAt < 0 && p.loaded >= abortAt && p.loaded < p.total) {
          abortedAt = p.loaded;
          ctl.abort();
        }
      },
    });
    return { ok: true, result: res, abortedAt, total };
  } catch (e) {
    return { ok: false, error: errorJSON(e), abortedAt, total };
  }
}

// refused tries, from an origin the service does not allow, the client
// (which first reads the limits), the client with the limits given (so
// that the upload request itself is tried), and a bare fetch.
export async function refused({ api, token, ws, file }) {
  const out = {};
  try {
    out.client = { ok: true, result: await pu.uploadFiles(api, token, ws, [makeFile(file)], { attempts: 1 }) };
  } catch (e) {
    out.client = { ok: false, error: errorJSON(e) };
  }
  try {
    const limits = { per_file_bytes: 25 << 20, per_request_bytes: 4 << 20, max_attachments_per_message: 64, presign: true };
    out.clientWithLimits = { ok: true, result: await pu.uploadFiles(api, token, ws, [makeFile(file)], { limits }) };
  } catch (e) {
    out.clientWithLimits = { ok: false, error: errorJSON(e) };
  }
  try {
    const fd = new FormData();
    fd.append("files", makeFile(file));
    const r = await fetch(`${api}/workspaces/${ws}/chat/uploads`, { method: "POST", headers: { Authorization: `Bearer ${token}` }, body: fd });
    out.fetch = { ok: true, status: r.status };
  } catch (e) {
    out.fetch = { ok: false, error: { name: e.name, message: e.message } };
  }
  return out;
}
