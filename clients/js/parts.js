// Files in parts: the plan the service answers at presign (checked
// against the file), the parts sent a few at a time with their URLs
// renewed before they expire, and the resume: where an upload in parts
// is remembered (localResumeStore by default) and how a later call takes
// it up.

import { PendingUploadsError, UPLOAD_COMMITTED, abortedError, bucketError, serviceCode } from "./errors.js";
import { retryable, serviceJSON, stallLimit, withRetries, wsURL, transfer } from "./http.js";
import { fileName } from "./multipart.js";
import { PUT_TIMEOUT_MS, abortUpload, commit } from "./presign.js";

// A part's PUT URL is valid 15 minutes (the service says when in
// expires_at); a part that would start later than a minute before that
// asks for fresh URLs first.
const PART_URL_TTL_MS = 15 * 60_000;
const PART_URL_MARGIN_MS = 60_000;
// Keys of the default resume store in localStorage.
const RESUME_PREFIX = "pendinguploads.resume:";
const RESUME_MAX_AGE_MS = 24 * 60 * 60_000;

// checkPlan checks a multipart plan against f: part_count parts of
// part_bytes (the last shorter), each part to send of its size, with a
// URL. It returns the plan.
export function checkPlan(op, up, f) {
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

// partDeadline is when the URLs of a plan expiring at expiresAt (the
// server's clock; this one may be off) should no longer start a PUT.
function partDeadline(expiresAt) {
  const left = Date.parse(expiresAt) - Date.now();
  const ttl = Number.isFinite(left) ? Math.min(Math.max(left, 2 * PART_URL_MARGIN_MS), PART_URL_TTL_MS) : PART_URL_TTL_MS;
  return Date.now() + ttl - PART_URL_MARGIN_MS;
}

// partURLs holds the URLs of the parts of up's plan m still to send.
// expired tells when a part should no longer start with them; renew asks
// the service for fresh ones (one request, however many parts ask at
// once), which also drops the parts the bucket turns out to hold.
function partURLs(ctx, up, m, f, signal) {
  const urls = new Map(m.parts.map((p) => [p.part_number, p]));
  let deadline = partDeadline(up.expires_at);
  let renewing = null;
  const renew = () =>
    (renewing ??= (async () => {
      try {
        const r = await resumeUpload(ctx, up.upload_id, signal);
        const fresh = checkPlan("resume", r, f);
        const missing = new Set(fresh.parts.map((p) => p.part_number));
        for (const p of fresh.parts) urls.set(p.part_number, p);
        for (const num of urls.keys()) if (!missing.has(num)) urls.delete(num);
        deadline = partDeadline(r.expires_at);
      } finally {
        renewing = null;
      }
    })());
  return { get: (num) => urls.get(num), expired: () => Date.now() > deadline, renew };
}

// partProgress counts a file's bytes for onFileProgress: those the bucket
// held at the start (and the parts done since) plus those of the parts in
// flight. move reports a part's bytes, reset and drop forget them
// silently (the next report tells), done counts a part held.
function partProgress(f, m, onFileProgress) {
  let held = f.size - m.parts.reduce((s, p) => s + p.size, 0);
  const moving = new Map();
  const emit = () => {
    let n = held;
    for (const v of moving.values()) n += v;
    onFileProgress(n);
  };
  emit();
  return {
    move(num, n) {
      moving.set(num, n);
      emit();
    },
    reset: (num) => moving.set(num, 0),
    drop: (num) => moving.delete(num),
    done(num, bytes) {
      moving.delete(num);
      held += bytes;
      emit();
    },
  };
}

// sendPart sends part num of f, retried on its own: exactly its presigned
// headers (less Content-Length) and no credentials, read again from f as
// a slice (never the whole file). URLs about to expire, or refused with
// 403 once, are renewed first; a part the bucket holds already is not
// sent.
async function sendPart(ctx, num, { op, f, partBytes, urls, progress, signal }) {
  const start = (num - 1) * partBytes;
  const partOp = `${op} part ${num}`;
  let renewed = false;
  const put = async () => {
    const p = urls.get(num);
    if (!p) return null; // the bucket holds it already
    progress.move(num, 0);
    return transfer(partOp, {
      method: p.method || "PUT",
      url: p.url,
      headers: p.headers,
      body: f.slice(start, start + p.size),
      signal,
      timeoutMs: PUT_TIMEOUT_MS,
      stallMs: stallLimit(ctx.stallTimeoutMs, p.size),
      peer: "bucket",
      onUploadProgress: (n) => progress.move(num, Math.min(n, p.size)),
    });
  };
  try {
    await withRetries(partOp, ctx.attempts, signal, async () => {
      if (urls.expired()) await urls.renew();
      let r;
      try {
        r = await put();
        if (r && r.status === 403 && !renewed) {
          // Expired (a slow start, a clock off): fresh URLs, once.
          renewed = true;
          await urls.renew();
          r = await put();
        }
      } catch (err) {
        progress.reset(num);
        throw err;
      }
      if (r && (r.status < 200 || r.status > 299)) {
        progress.reset(num);
        throw bucketError(partOp, r);
      }
      progress.done(num, Math.min(partBytes, f.size - start));
    });
  } catch (err) {
    progress.drop(num);
    throw err;
  }
}

// putParts sends the parts of f that up's plan lists, inFlight at a time
// (sendPart). When one fails for good the others are stopped, and the
// first failure is thrown. onFileProgress gets the file's bytes: those
// the bucket held at the start plus those of the parts in flight.
export async function putParts(ctx, up, f, { inFlight, onFileProgress }) {
  const op = `put ${fileName(f)}`;
  const m = checkPlan(op, up, f);
  const progress = partProgress(f, m, onFileProgress);
  // ctl stops every part: the caller's abort, or one part failing.
  const ctl = new AbortController();
  const outer = ctx.signal;
  const onAbort = () => ctl.abort(outer.reason);
  if (outer) {
    if (outer.aborted) ctl.abort(outer.reason);
    else outer.addEventListener("abort", onAbort, { once: true });
  }
  const part = { op, f, partBytes: m.part_bytes, urls: partURLs(ctx, up, m, f, ctl.signal), progress, signal: ctl.signal };
  const queue = m.parts.map((p) => p.part_number);
  let failed = null;
  const worker = async () => {
    while (queue.length > 0 && !failed) {
      try {
        await sendPart(ctx, queue.shift(), part);
      } catch (err) {
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
// parts, {staged} when an earlier call committed it (code
// upload_committed, or a 409 from a server older than codes: its commit,
// repeated, answers the same file), or {} when the server no longer has
// it (upload_not_found, or any other refusal): the caller starts over.
export async function resumeSaved(ctx, saved, f) {
  let plan;
  try {
    plan = await resumeUpload(ctx, saved.upload_id, ctx.signal);
  } catch (err) {
    if (!(err instanceof PendingUploadsError) || err.code === "aborted" || retryable(err) || err.status === 401 || err.status === 403) throw err;
    if (serviceCode(err, { 409: UPLOAD_COMMITTED }) === UPLOAD_COMMITTED) {
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
export function resumeKey(workspaceId, f) {
  if (typeof f.lastModified !== "number" || typeof f.name !== "string") return null;
  return JSON.stringify([String(workspaceId), f.name, f.size, f.lastModified]);
}

// The store is best effort: a store that fails (a full or disabled
// localStorage) costs the resume, never the upload.
export async function storeGet(store, key) {
  try {
    const v = await store.get(key);
    return v && typeof v === "object" && typeof v.upload_id === "string" ? v : null;
  } catch {
    return null;
  }
}

export async function storeSet(store, key, value) {
  try {
    await store.set(key, value);
  } catch {
    // not remembered: a reload starts over
  }
}

export async function storeDelete(store, key) {
  try {
    await store.delete(key);
  } catch {
    // a stale entry is dropped when it is next tried
  }
}
