// Page side of the browser test: makes files of known content, calls the
// client module as the canvas would, and returns plain JSON for the Go
// test to check. The Go test computes the same bytes (see pattern in
// browser_test.go).
import * as pu from "./pendinguploads.js";

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

// pattern returns size bytes of xorshift32 output from seed, each word
// little-endian: the same function as the Go test's pattern.
export function pattern(size, seed) {
  const words = new Uint32Array(Math.ceil(size / 4));
  let x = seed >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    words[i] = littleEndian ? x : ((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24);
  }
  return new Uint8Array(words.buffer, 0, size);
}

// makeFile makes f's File; with lastModified, always the same File, as
// a file picked again after a reload is.
function makeFile(f) {
  const opts = { type: f.type || "" };
  if (f.lastModified) opts.lastModified = f.lastModified;
  return new File([pattern(f.size, f.seed)], f.name, opts);
}

// resumeEntries counts the client's default resume store's entries of
// workspace ws. The steps of one test share the browser's profile, so
// another step's upload (another workspace) is not this step's to count.
function resumeEntries(ws) {
  const prefix = "pendinguploads.resume:";
  let n = 0;
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i);
    if (!k.startsWith(prefix)) continue;
    try {
      if (JSON.parse(k.slice(prefix.length))[0] === String(ws)) n++;
    } catch {
      n++; // not a key this client writes: counted, so that it shows
    }
  }
  return n;
}

function errorJSON(e) {
  return {
    name: e && e.name,
    isPendingUploadsError: e instanceof pu.PendingUploadsError,
    code: e && e.code,
    status: e && e.status,
    message: e && e.message,
    body: (e && e.body) || null,
    staged: (e && e.staged) || [],
    retryAfterMs: e && e.retryAfterMs !== undefined ? e.retryAfterMs : null,
  };
}

function secure() {
  return { isSecureContext: window.isSecureContext, subtle: !!(crypto && crypto.subtle) };
}

// upload stages files and follows the progress events; then downloads
// the ones at most downloadMax bytes back and compares them. attempts and
// partsInFlight go to the client as they are.
export async function upload({ api, token, ws, files, downloadMax, attempts, partsInFlight }) {
  const blobs = files.map(makeFile);
  const progress = { count: 0, backwards: false, first: null, last: null, fileLoaded: {} };
  let res;
  try {
    res = await pu.uploadFiles(api, token, ws, blobs, {
      attempts,
      partsInFlight,
      onProgress(p) {
        progress.count++;
        if (progress.last && p.loaded < progress.last.loaded) progress.backwards = true;
        progress.first ??= { loaded: p.loaded, total: p.total };
        progress.last = { loaded: p.loaded, total: p.total };
        progress.fileLoaded[p.index] = p.fileLoaded;
      },
    });
  } catch (e) {
    return { ok: false, error: errorJSON(e), progress, resumeEntries: resumeEntries(ws), ...secure() };
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
  return { ok: true, result: res, progress, downloads, resumeEntries: resumeEntries(ws), ...secure() };
}

// abortMidPut aborts the upload of one large file once its PUT (or its
// parts) have sent at least abortAt bytes (and not all of them). With
// onePut, the limits the client goes by take no parts (as a caller may
// choose): the file goes in one PUT.
export async function abortMidPut({ api, token, ws, file, abortAt, onePut }) {
  const ctl = new AbortController();
  let abortedAt = -1;
  let total = 0;
  try {
    const limits = onePut ? { ...(await pu.getLimits(api)), multipart_threshold_bytes: null, multipart_part_bytes: null } : undefined;
    const res = await pu.uploadFiles(api, token, ws, [makeFile(file)], {
      limits,
      signal: ctl.signal,
      onProgress(p) {
        total = p.total;
        if (abortedAt < 0 && p.loaded >= abortAt && p.loaded < p.total) {
          abortedAt = p.loaded;
          ctl.abort();
        }
      },
    });
    return { ok: true, result: res, abortedAt, total, resumeEntries: resumeEntries(ws) };
  } catch (e) {
    return { ok: false, error: errorJSON(e), abortedAt, total, resumeEntries: resumeEntries(ws) };
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

// storeCases uploads one file in parts twice through a resume store of
// its own (async, in memory). First the store holds an entry of an
// upload the service does not know (a stale one): the client must drop
// it and start over. Then the store holds the entry that first upload
// saved, of an upload committed since (its answer lost, as it were): the
// client must commit it again and get the same file, sending no part.
export async function storeCases({ api, token, ws, file }) {
  const f = makeFile(file);
  const log = { gets: 0, sets: [], deletes: 0 };
  let entry = { upload_id: crypto.randomUUID(), part_bytes: 8 << 20, sha256: null, saved_at: new Date().toISOString() };
  const store = {
    async get() {
      log.gets++;
      return entry;
    },
    async set(key, value) {
      log.sets.push(value);
      entry = value;
    },
    async delete() {
      log.deletes++;
      entry = null;
    },
  };
  const out = {};
  try {
    out.first = { ok: true, result: await pu.uploadFiles(api, token, ws, [f], { resumeStore: store, partsInFlight: 1 }) };
  } catch (e) {
    out.first = { ok: false, error: errorJSON(e) };
  }
  out.first.log = { ...log, sets: log.sets.length };
  entry = log.sets[0] || null;
  try {
    out.again = { ok: true, result: await pu.uploadFiles(api, token, ws, [f], { resumeStore: store }) };
  } catch (e) {
    out.again = { ok: false, error: errorJSON(e) };
  }
  out.again.log = { ...log, sets: log.sets.length };
  return out;
}

// ackFile acknowledges fileId as the workspace (ack, retried as it is
// safe to repeat; attempts as given) and returns {ok, result} or {ok:
// false, error}.
export async function ackFile({ api, token, ws, fileId, attempts }) {
  try {
    return { ok: true, result: await pu.ack(api, token, ws, fileId, { attempts }) };
  } catch (e) {
    return { ok: false, error: errorJSON(e) };
  }
}
