// Requests: what every request to the service carries (the caller's
// headers, the token, the credentials mode), JSON requests with fetch,
// transfers with upload progress and stall limits (XMLHttpRequest, or
// fetch where there is none, as in node) to the service or the bucket,
// and the retries of those that are safe to repeat.

import { PendingUploadsError, abortedError, throwIfAborted, httpError, networkError, timeoutError, seconds } from "./errors.js";

// JSON routes (limits, presign, commit, ack) must answer within this.
const JSON_TIMEOUT_MS = 60_000;
// A transfer is given up when no byte moved for max(STALL_MIN_MS, its
// bytes / STALL_FLOOR_BYTES_PER_MS) (stallTimeoutMs sets another): the
// canvas's own floor, about 100 KB/s, the slowest uplink it allows for.
const STALL_MIN_MS = 60_000;
const STALL_FLOOR_BYTES_PER_MS = 100;
const DEFAULT_ATTEMPTS = 3;
const MAX_ATTEMPTS = 6;
const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 4_000;
// When the service asks to come back (a 503 or 429 with Retry-After: a
// database resuming from its pause takes ~15 s, ~30 s after a day), a
// wait is at least what it asks, at most RETRY_AFTER_MAX_MS, and the
// tries go on, up to RETRY_AFTER_MAX_TRIES (or the caller's attempts),
// while all the waits together stay within RETRY_AFTER_BUDGET_MS: at the
// service's Retry-After of 5 s, six waits, the last try 30 s after the
// first, past a resume of ~30 s.
const RETRY_AFTER_MAX_MS = 10_000;
const RETRY_AFTER_BUDGET_MS = 30_000;
const RETRY_AFTER_MAX_TRIES = 7;

export function trimBase(api) {
  return String(api).replace(/\/+$/, "");
}

// wsURL is {api}/workspaces/{workspaceId}/{segments…}, each escaped.
export function wsURL(api, workspaceId, ...segments) {
  return [trimBase(api), "workspaces", encodeURIComponent(workspaceId), ...segments.map(encodeURIComponent)].join("/");
}

// linked returns a signal that aborts when outer does or after ms, and a
// function that detaches it; timedOut tells which one fired.
function linked(outer, ms) {
  const ctl = new AbortController();
  let timedOut = false;
  const onAbort = () => ctl.abort(outer.reason);
  if (outer) {
    if (outer.aborted) ctl.abort(outer.reason);
    else outer.addEventListener("abort", onAbort, { once: true });
  }
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort();
  }, ms);
  return {
    signal: ctl.signal,
    timedOut: () => timedOut,
    done() {
      clearTimeout(timer);
      if (outer) outer.removeEventListener("abort", onAbort);
    },
  };
}

function sleep(ms, signal, op) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(abortedError(op, signal));
    const t = setTimeout(() => {
      if (signal) signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortedError(op, signal));
    };
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
  });
}

// retryable: no answer (network, timeout) or an answer that says the
// server or the bucket failed, or asks to come back.
export function retryable(err) {
  if (!(err instanceof PendingUploadsError)) return false;
  if (err.code === "network" || err.code === "timeout") return true;
  return err.code === "http" && (err.status >= 500 || err.status === 429 || err.status === 408);
}

// withRetries runs fn up to attempts times (default 3, at most 6) while
// the error is retryable, with exponential backoff and jitter. An error
// that carries the service's Retry-After (retryAfterMs: a 503 or 429)
// waits max(backoff, retryAfterMs), at most RETRY_AFTER_MAX_MS, and is
// tried again up to RETRY_AFTER_MAX_TRIES times in all (the caller's attempts,
// when given, stay the cap) while the waits together stay within
// RETRY_AFTER_BUDGET_MS: so that a database resuming from its pause is
// waited out. The signal cuts any wait short. Only for requests that are
// safe to send again.
export async function withRetries(op, attempts, signal, fn) {
  const n = Math.min(Math.max(1, Math.floor(attempts || DEFAULT_ATTEMPTS)), MAX_ATTEMPTS);
  const asked = attempts ? n : RETRY_AFTER_MAX_TRIES;
  let waited = 0;
  for (let i = 1; ; i++) {
    try {
      return await fn(i);
    } catch (err) {
      if (!retryable(err) || (signal && signal.aborted)) throw err;
      const after = Number.isFinite(err.retryAfterMs) && err.retryAfterMs > 0 ? err.retryAfterMs : 0;
      if (i >= (after ? asked : n)) throw err;
      const d = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (i - 1));
      let wait = d / 2 + Math.random() * (d / 2);
      if (after) {
        wait = Math.min(RETRY_AFTER_MAX_MS, Math.max(wait, after));
        if (waited + wait > RETRY_AFTER_BUDGET_MS) throw err;
      }
      waited += wait;
      await sleep(wait, signal, op);
    }
  }
}

const CREDENTIALS = ["include", "same-origin", "omit"];

// service is what every request to the service carries, from a call's
// arguments: the bearer token (or none), the caller's extra headers (an
// object, or a function called for each request) and the fetch
// credentials mode (default "include" without a token: the page's
// session cookie is the credential; "omit" with one). Never used for the
// bucket.
export function service(op, api, token, workspaceId, { headers, credentials } = {}) {
  if (headers !== undefined && headers !== null && typeof headers !== "function" && typeof headers !== "object") {
    throw new PendingUploadsError(`${op}: headers must be an object or a function that returns one`, { code: "invalid" });
  }
  if (credentials !== undefined && !CREDENTIALS.includes(credentials)) {
    throw new PendingUploadsError(`${op}: credentials must be one of ${CREDENTIALS.join(", ")}`, { code: "invalid" });
  }
  return { api, token, workspaceId, extraHeaders: headers || null, credentials: credentials || (token ? "omit" : "include") };
}

// serviceHeaders is the headers of one request to the service: the
// caller's (asked anew for each request), then the bearer token's
// Authorization, then ours (Content-Type), later ones winning whatever
// their case.
export async function serviceHeaders(op, svc, ours = {}) {
  const h = new Headers();
  if (svc.extraHeaders) {
    let extra;
    try {
      extra = typeof svc.extraHeaders === "function" ? await svc.extraHeaders() : svc.extraHeaders;
      for (const [k, v] of Object.entries(extra || {})) if (v !== undefined && v !== null) h.set(k, String(v));
    } catch (err) {
      throw new PendingUploadsError(`${op}: the caller's headers: ${err && err.message}`, { code: "invalid", cause: err });
    }
  }
  if (svc.token) h.set("Authorization", `Bearer ${svc.token}`);
  for (const [k, v] of Object.entries(ours)) h.set(k, v);
  return Object.fromEntries(h);
}

// request sends one fetch to the service and returns the Response when it
// is 2xx, with done to call once its body is read.
export async function request(op, url, { method = "GET", headers = {}, body, signal, timeoutMs = JSON_TIMEOUT_MS, credentials = "omit" }) {
  throwIfAborted(op, signal);
  const l = linked(signal, timeoutMs);
  let resp;
  try {
    resp = await fetch(url, { method, headers, body, signal: l.signal, redirect: "follow", credentials });
  } catch (err) {
    l.done();
    if (signal && signal.aborted) throw abortedError(op, signal);
    if (l.timedOut()) throw timeoutError(op, `no answer within ${seconds(timeoutMs)}`, err);
    throw networkError(op, "service", err);
  }
  if (!resp.ok) {
    let text = "";
    try {
      text = await resp.text();
    } catch {
      // the status says enough
    }
    l.done();
    throw httpError(op, resp.status, text, resp.headers.get("Retry-After"));
  }
  return { resp, done: l.done, signal: l.signal, timedOut: l.timedOut };
}

async function requestJSON(op, url, opts) {
  const r = await request(op, url, opts);
  try {
    return await r.resp.json();
  } catch (err) {
    if (opts.signal && opts.signal.aborted) throw abortedError(op, opts.signal);
    throw new PendingUploadsError(`${op}: the answer is not JSON`, { status: r.resp.status, code: "bad_response", cause: err });
  } finally {
    r.done();
  }
}

// serviceJSON is one JSON request to the service, with what svc says
// every such request carries.
export async function serviceJSON(op, svc, url, { method = "GET", json, signal, timeoutMs } = {}) {
  const headers = await serviceHeaders(op, svc, json === undefined ? {} : { "Content-Type": "application/json" });
  return requestJSON(op, url, { method, headers, body: json === undefined ? undefined : JSON.stringify(json), signal, timeoutMs, credentials: svc.credentials });
}

// parseJSONText parses the text of a 2xx answer.
export function parseJSONText(op, status, text) {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new PendingUploadsError(`${op}: the answer is not JSON`, { status, code: "bad_response", cause: err });
  }
}

function forbiddenHeader(name) {
  // Browsers set these themselves and refuse them from scripts.
  return ["content-length", "host", "connection", "expect", "transfer-encoding"].includes(name.toLowerCase());
}

// stallLimit is how long a request of bytes may go without a byte moving
// before it is given up: stallTimeoutMs when the caller set it, else the
// canvas's floor of about 100 KB/s over the request's bytes, and never
// less than a minute.
export function stallLimit(stallTimeoutMs, bytes) {
  if (Number.isFinite(stallTimeoutMs) && stallTimeoutMs > 0) return stallTimeoutMs;
  return Math.max(STALL_MIN_MS, Math.ceil(bytes / STALL_FLOOR_BYTES_PER_MS));
}

// transfer sends body (a Blob) with progress and a stall limit: with
// XMLHttpRequest, the only browser API that reports upload progress;
// where there is none (node, a worker of some runtimes), with fetch,
// streaming the Blob (a file read from disk as it goes: fs.openAsBlob)
// and counting the bytes handed to the connection. It resolves with the
// status, text and Retry-After header (null when none) of any answer; it
// rejects only when no answer arrived:
// code "timeout" when no byte moved either way for stallMs (or the whole
// request outlived timeoutMs). peer ("bucket" or "service") names who
// did not answer. withCredentials only for the service, with credentials
// "include".
export function transfer(op, opts) {
  return typeof XMLHttpRequest === "undefined" ? fetchSend(op, opts) : xhrSend(op, opts);
}

// fetchSend is transfer with fetch: the Blob streamed with its
// Content-Length (a presigned PUT must carry it: S3 refuses a chunked
// body), progress as each piece is handed over.
async function fetchSend(op, { method, url, headers, body, signal, timeoutMs, stallMs, onUploadProgress, peer, withCredentials = false }) {
  if (signal && signal.aborted) throw abortedError(op, signal);
  const ctl = new AbortController();
  let why = ""; // "stall" or "timeout": our own abort
  let stallTimer;
  const arm = () => {
    clearTimeout(stallTimer);
    stallTimer = setTimeout(() => {
      why = "stall";
      ctl.abort();
    }, stallMs);
  };
  const whole = setTimeout(() => {
    why = "timeout";
    ctl.abort();
  }, timeoutMs);
  const onAbort = () => ctl.abort();
  if (signal) signal.addEventListener("abort", onAbort, { once: true });
  const h = {};
  for (const [k, v] of Object.entries(headers || {})) {
    if (!forbiddenHeader(k)) h[k] = v;
  }
  h["content-length"] = String(body.size);
  const reader = body.stream().getReader();
  let sent = 0;
  const stream = new ReadableStream({
    async pull(c) {
      const { done, value } = await reader.read();
      if (done) return c.close();
      sent += value.byteLength;
      arm();
      if (onUploadProgress) onUploadProgress(sent);
      c.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  arm();
  try {
    const res = await fetch(url, {
      method,
      headers: h,
      body: stream,
      duplex: "half",
      credentials: withCredentials ? "include" : "omit",
      signal: ctl.signal,
    });
    arm();
    return { status: res.status, text: await res.text(), retryAfter: res.headers.get("Retry-After") };
  } catch (err) {
    if (signal && signal.aborted) throw abortedError(op, signal);
    if (why === "stall") throw timeoutError(op, `no byte moved for ${seconds(stallMs)}`, err);
    if (why === "timeout") throw timeoutError(op, `not done within ${seconds(timeoutMs)}`, err);
    throw networkError(op, peer, err);
  } finally {
    clearTimeout(stallTimer);
    clearTimeout(whole);
    if (signal) signal.removeEventListener("abort", onAbort);
  }
}

// xhrSend is transfer with XMLHttpRequest.
function xhrSend(op, { method, url, headers, body, signal, timeoutMs, stallMs, onUploadProgress, peer, withCredentials = false }) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(abortedError(op, signal));
    const x = new XMLHttpRequest();
    let stalled = false;
    let stallTimer;
    const arm = () => {
      clearTimeout(stallTimer);
      stallTimer = setTimeout(() => {
        stalled = true;
        x.abort();
      }, stallMs);
    };
    const onAbort = () => x.abort();
    const cleanup = () => {
      clearTimeout(stallTimer);
      if (signal) signal.removeEventListener("abort", onAbort);
    };
    x.open(method, url);
    x.withCredentials = withCredentials;
    for (const [k, v] of Object.entries(headers || {})) {
      if (!forbiddenHeader(k)) x.setRequestHeader(k, v);
    }
    x.timeout = timeoutMs;
    let last = -1;
    x.upload.onprogress = (e) => {
      if (e.loaded > last) {
        last = e.loaded;
        arm();
      }
      if (onUploadProgress) onUploadProgress(e.loaded);
    };
    x.upload.onload = arm;
    x.onprogress = arm;
    x.onload = () => {
      cleanup();
      // Retry-After only where the service may send it: the bucket does
      // not expose it, and the browser logs "Refused to get unsafe
      // header" for every such read.
      const asks = peer === "service" && (x.status === 503 || x.status === 429);
      resolve({ status: x.status, text: x.responseText, retryAfter: asks ? x.getResponseHeader("Retry-After") : null });
    };
    x.onerror = () => {
      cleanup();
      reject(networkError(op, peer));
    };
    x.ontimeout = () => {
      cleanup();
      reject(timeoutError(op, `not done within ${seconds(timeoutMs)}`));
    };
    x.onabort = () => {
      cleanup();
      if (stalled && !(signal && signal.aborted)) reject(timeoutError(op, `no byte moved for ${seconds(stallMs)}`));
      else reject(abortedError(op, signal));
    };
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
    arm();
    x.send(body);
  });
}
