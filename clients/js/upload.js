// uploadFiles: which file goes how (multipart, one presigned PUT, parts),
// in which order (large files to the bucket first, small ones, then the
// commits), with progress, SHA-256 checks, and on an abort or failure
// the cleanup of what will not be committed.

import { PendingUploadsError, formatBytes, refusedByBucket, throwIfAborted } from "./errors.js";
import { service } from "./http.js";
import { MAX_FILES_PER_REQUEST, checkLimits, getLimits } from "./limits.js";
import { fileName, multipartSize, packBatches, postMultipart } from "./multipart.js";
import { checkPlan, localResumeStore, putParts, resumeKey, resumeSaved, storeDelete, storeGet, storeSet } from "./parts.js";
import { abortUpload, commit, notReceived, presign, putPresigned } from "./presign.js";
import { hasDigest, hashParts, sha256Hex } from "./sha256.js";

// Parts of one file in flight at once (partsInFlight).
const DEFAULT_PARTS_IN_FLIGHT = 4;
const MAX_PARTS_IN_FLIGHT = 16;

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
  const call = await startCall("upload", api, token, workspaceId, files, options);
  try {
    const commits = [];
    for (let s = 0; s < call.large.length; s += MAX_FILES_PER_REQUEST) {
      const c = await sendLarge(call, call.large.slice(s, s + MAX_FILES_PER_REQUEST));
      if (c.ids.length > 0) commits.push(c);
    }
    await postSmall(call);
    for (const c of commits) await commitLarge(call, c);
    await checkDigests(call);
  } catch (err) {
    throw await failed(call, err);
  }
  return { files: call.out };
}

// startCall checks uploadFiles' arguments, reads the limits, sorts the
// files (sortFiles) and returns the call's state: its files and
// options, out (the staged files, by input index), open (the uploads
// presigned or resumed and not committed, by upload_id, with their
// resume keys; null: not remembered), digests and report.
async function startCall(op, api, token, workspaceId, files, options) {
  const { onProgress, signal, limits, attempts, partsInFlight, resumeStore, stallTimeoutMs } = options;
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
  const { small, large, inParts } = sortFiles(list, lim);
  return {
    op, workspaceId, list, lim, small, large, inParts, store, inFlight, signal,
    ctx: { ...svc, signal, attempts, stallTimeoutMs },
    digests: startDigests(list, inParts),
    report: progressReporter(list, onProgress),
    out: new Array(list.length),
    open: new Map(),
  };
}

// sortFiles sorts the files by how they go: small (their multipart part
// fits one request), large (presigned), inParts (large, above the
// multipart threshold), by input index. A file that is empty, over the
// per-file cap, or too large for a server without presign is an error.
function sortFiles(list, lim) {
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
  return { small, large, inParts };
}

// startDigests hashes the files while the bytes travel, one file at a
// time (each is read whole into memory), to check against the server's
// answers. A file in parts is hashed part by part before its presign
// instead (its digest is set then; null: unchecked). null without
// SubtleCrypto.
function startDigests(list, inParts) {
  if (!hasDigest()) return null;
  let chain = Promise.resolve();
  const digests = list.map((f, i) => (inParts.has(i) ? null : (chain = chain.then(() => sha256Hex(f)))));
  digests.forEach((p) => p && p.catch(() => {}));
  return digests;
}

// progressReporter returns report(i, n): file i has n bytes sent. A
// file's count only grows: bytes sent again (a retried PUT or part)
// count once they pass where the file was.
function progressReporter(list, onProgress) {
  const total = list.reduce((s, f) => s + f.size, 0);
  const sent = new Array(list.length).fill(0);
  let loaded = 0;
  return (i, n) => {
    n = Math.min(list[i].size, n);
    if (!(n > sent[i])) return;
    loaded += n - sent[i];
    sent[i] = n;
    if (onProgress) onProgress({ loaded, total, index: i, file: list[i], fileLoaded: n, fileTotal: list[i].size });
  };
}

// forget drops upload id from the call's open uploads and its resume
// entry.
async function forget(call, id) {
  const key = call.open.get(id);
  call.open.delete(id);
  if (key) await storeDelete(call.store, key);
}

// sendLarge sends a batch of at most 64 large files to the bucket: the
// remembered uploads of files in parts taken up, the other files
// presigned, then each file PUT whole or in parts. It returns the commit
// to make, {idx, ids}: the input indexes and their upload_ids.
async function sendLarge(call, batch) {
  const { list, inParts, out } = call;
  const ups = new Array(batch.length);
  const declared = new Array(batch.length);
  const keys = batch.map((i) => (call.store && inParts.has(i) ? resumeKey(call.workspaceId, list[i]) : null));
  for (let k = 0; k < batch.length; k++) {
    if (!inParts.has(batch[k])) continue;
    const r = await prepareParts(call, batch[k], keys[k]);
    ups[k] = r.plan;
    declared[k] = r.declared;
  }
  const fresh = [];
  for (let k = 0; k < batch.length; k++) if (!ups[k] && !out[batch[k]]) fresh.push(k);
  if (fresh.length > 0) await presignFresh(call, batch, fresh, { ups, declared, keys });
  const c = { idx: [], ids: [] };
  for (let k = 0; k < batch.length; k++) {
    const i = batch[k];
    if (out[i]) continue;
    await sendFile(call, i, ups[k]);
    call.report(i, list[i].size);
    c.idx.push(i);
    c.ids.push(ups[k].upload_id);
  }
  return c;
}

// prepareParts readies file i, which goes in parts, remembered under key
// (null: not remembered): {plan} when its remembered upload is taken up;
// {} when an earlier call committed it (out[i] is set); else {declared},
// what its presign declares: the file's SHA-256 and each part's.
async function prepareParts(call, i, key) {
  const { list, store, digests } = call;
  const saved = key && (await storeGet(store, key));
  if (saved) {
    // Open from here: an abort while it is taken up drops it.
    call.open.set(saved.upload_id, key);
    const r = await resumeSaved(call.ctx, saved, list[i]);
    const known = () => (typeof saved.sha256 === "string" ? Promise.resolve(saved.sha256) : null);
    if (r.plan) {
      if (digests) digests[i] = known();
      return { plan: r.plan };
    }
    call.open.delete(saved.upload_id);
    if (r.staged) {
      // Committed by an earlier call whose answer was lost.
      call.out[i] = r.staged;
      if (digests) digests[i] = known();
      call.report(i, list[i].size);
    }
    await storeDelete(store, key);
    if (r.staged) return {};
  }
  const declared = { multipart: true };
  if (digests) {
    const h = await hashParts(`hash ${fileName(list[i])}`, list[i], call.lim.multipart_part_bytes, call.signal);
    declared.sha256 = h.sha256;
    declared.parts = h.parts.map((sha256) => ({ sha256 }));
    digests[i] = Promise.resolve(h.sha256);
  }
  return { declared };
}

// presignFresh presigns the files of batch at the indexes fresh, with
// what each declares, checks the plans of those in parts, and sets ups
// (by batch index); each upload is open from then on, and one in parts
// is remembered under its key.
async function presignFresh(call, batch, fresh, { ups, declared, keys }) {
  const files = fresh.map((k) => call.list[batch[k]]);
  const got = await presign(call.ctx, fresh.map((k, j) => ({ f: files[j], extra: declared[k] })));
  got.forEach((up, j) => {
    if (up && up.multipart) checkPlan("presign", up, files[j]);
  });
  for (let j = 0; j < fresh.length; j++) {
    const k = fresh[j];
    const up = got[j];
    ups[k] = up;
    const key = up.multipart ? keys[k] : null;
    call.open.set(up.upload_id, key);
    if (key) {
      await storeSet(call.store, key, {
        upload_id: up.upload_id,
        part_bytes: up.multipart.part_bytes,
        sha256: declared[k] && declared[k].sha256 ? declared[k].sha256 : null,
        saved_at: new Date().toISOString(),
      });
    }
  }
}

// sendFile sends file i to the bucket as up says: one PUT, or parts.
async function sendFile(call, i, up) {
  const f = call.list[i];
  const report = (n) => call.report(i, n);
  if (!up.multipart) return putPresigned(call.ctx, up, f, { onUploadProgress: report });
  try {
    await putParts(call.ctx, up, f, { inFlight: call.inFlight, onFileProgress: report });
  } catch (err) {
    // A part the bucket refused (the file changed, say) would be refused
    // again: the upload is dropped, the next call starts over. A part
    // that could not be sent keeps it for a resume.
    if (refusedByBucket.has(err)) {
      await abortUpload(call.ctx, up.upload_id);
      await forget(call, up.upload_id);
    }
    throw err;
  }
}

// postSmall stages the small files, in requests of at most
// per_request_bytes and 64 files.
async function postSmall(call) {
  const { list, out } = call;
  for (const batch of packBatches(list, call.small, call.lim.per_request_bytes)) {
    const got = await postMultipart(call.ctx, batch.map((i) => list[i]), {
      onBodyProgress: (starts, n) => batch.forEach((i, k) => call.report(i, n - starts[k])),
    });
    batch.forEach((i, k) => {
      out[i] = got[k];
      call.report(i, list[i].size);
    });
  }
}

// commitLarge stages the uploads of c, whose bytes the bucket holds.
async function commitLarge(call, c) {
  let got;
  try {
    got = await commit(call.ctx, c.ids);
  } catch (err) {
    // Not received, after every part went in: what the bucket holds is
    // not the file declared (it changed since its first parts went, and
    // the bucket did not check their checksums). A resume would send
    // nothing: the upload is dropped, the next call starts over.
    const id = notReceived(err);
    if (id && call.open.has(id)) {
      await abortUpload(call.ctx, id);
      await forget(call, id);
    }
    throw err;
  }
  c.idx.forEach((i, k) => (call.out[i] = got[k]));
  for (const id of c.ids) await forget(call, id);
}

// checkDigests checks each staged file's sha256 against the file's.
async function checkDigests(call) {
  const { digests, list, out } = call;
  if (!digests) return;
  for (let i = 0; i < list.length; i++) {
    const want = await digests[i];
    if (want && String(out[i].sha256).toLowerCase() !== want) {
      throw new PendingUploadsError(`${call.op}: ${fileName(list[i])}: the server stored sha256 ${out[i].sha256}, the file has ${want}`, {
        code: "digest_mismatch",
        body: out[i],
      });
    }
  }
}

// failed is the error the call rejects with for err: a
// PendingUploadsError, with the files staged so far. Aborted, the call
// first drops what it opened, on both sides: nothing of it is kept for a
// resume.
async function failed(call, err) {
  const e = err instanceof PendingUploadsError ? err : new PendingUploadsError(`${call.op}: ${err && err.message}`, { code: "invalid", cause: err });
  if (call.signal && call.signal.aborted && call.open.size > 0) {
    await Promise.all(
      Array.from(call.open.keys(), async (id) => {
        await abortUpload(call.ctx, id);
        await forget(call, id);
      }),
    );
  }
  e.staged = call.out.filter(Boolean);
  return e;
}
