// The client's pure logic, in node (modules_test.go runs it with node
// --test): the service's error answers read by code whatever their
// message says, a server older than codes read by status and fields, and
// the incremental SHA-256 against node's own, Retry-After honoured.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";

import { pendingFile } from "../../attachment.js";
import { PendingUploadsError, httpError, retryAfterMs, serviceCode } from "../../errors.js";
import { withRetries } from "../../http.js";
import { checkPlan, putParts } from "../../parts.js";
import { notReceived } from "../../presign.js";
import { Sha256 } from "../../sha256.js";

const id = "0b5f7a5e-8a4b-4d1c-9d0e-1f2a3b4c5d6e";

// Each answer as the server sends it with codes (h-api's wire.Code), as
// a server older than codes sends it, and reworded: the client's code
// and sentence must not change with the message.
const answers = [
  {
    name: "QuotaFiles",
    status: 409,
    body: { code: "quota_exceeded", quota: "pending_files", limit: 64, pending: 64, adding: 1 },
    code: "quota_exceeded",
    says: "the workspace has 64 files waiting, and this upload (1 file) would pass its limit of 64 files",
  },
  {
    name: "QuotaBytes",
    status: 409,
    body: { code: "quota_exceeded", quota: "pending_bytes", limit: 5 << 20, pending: 4 << 20, adding: 2 << 20 },
    code: "quota_exceeded",
    says: "the workspace has 4 MiB waiting, and this upload (2 MiB) would pass its limit of 5 MiB",
  },
  {
    name: "FileTooLarge",
    status: 413,
    body: { code: "file_too_large", filename: "big.bin", size: 120 << 20, max: 100 << 20 },
    code: "too_large",
    says: "big.bin is 120 MiB, over the limit of 100 MiB per file",
  },
  {
    name: "RequestTooLarge",
    status: 413,
    body: { code: "request_too_large", max: 4 << 20 },
    code: "too_large",
    says: "the request is over the 4 MiB one request may carry",
  },
  {
    name: "Unavailable",
    status: 503,
    body: { code: "unavailable" },
    code: "http",
    says: "the upload service is unavailable right now (503: ",
  },
  {
    name: "NotReceived",
    status: 409,
    body: { code: "upload_not_received", upload_id: id },
    code: "http",
    says: "commit: ",
    notReceived: id,
  },
];

const messages = ["as the server says it", "reworded by a later server", "upload not received", "workspace quota exceeded"];

for (const a of answers) {
  for (const [mode, body] of [
    ["WithCode", a.body],
    ["OlderServer", Object.fromEntries(Object.entries(a.body).filter(([k]) => k !== "code"))],
  ]) {
    test(`${a.name}/${mode}`, () => {
      for (const error of messages) {
        const e = httpError("commit", a.status, JSON.stringify({ error, ...body }));
        assert.ok(e instanceof PendingUploadsError);
        assert.equal(e.code, a.code, `message ${JSON.stringify(error)}: code`);
        assert.equal(e.status, a.status);
        assert.ok(e.message.includes(a.says), `message ${JSON.stringify(error)}: got ${JSON.stringify(e.message)}, want it to say ${JSON.stringify(a.says)}`);
        assert.equal(notReceived(e), a.notReceived || null, `message ${JSON.stringify(error)}: notReceived`);
      }
    });
  }
}

test("CodeWinsOverFields", () => {
  // A 409 naming an upload is not_received only when no code says
  // otherwise; a 413 naming a max is too_large only by its code or, with
  // none, its fields.
  const committed = httpError("resume", 409, JSON.stringify({ error: "upload not received", code: "upload_committed", upload_id: id }));
  assert.equal(serviceCode(committed, { 409: "upload_committed" }), "upload_committed");
  assert.equal(notReceived(committed), null);
  const gateway = httpError("upload", 413, JSON.stringify({ error: "file exceeds per-file cap", code: "gateway", filename: "a", size: 2, max: 1 }));
  assert.equal(gateway.code, "http");
});

test("NoAnswerHasNoCode", () => {
  const net = new PendingUploadsError("could not reach", { code: "network" });
  assert.equal(serviceCode(net, { 409: "upload_committed" }), "");
  assert.equal(notReceived(net), null);
  assert.equal(notReceived(new Error("upload not received")), null);
  // A proxy's page: no JSON, the status alone.
  const proxy = httpError("commit", 409, "<html>upload not received</html>");
  assert.equal(proxy.body, null);
  assert.equal(notReceived(proxy), null);
});

test("Sha256", () => {
  // Every length around the 64-byte block and the 56-byte padding edge,
  // fed whole and a byte at a time.
  const data = randomBytes(300);
  for (let n = 0; n <= data.length; n++) {
    const b = data.subarray(0, n);
    const want = createHash("sha256").update(b).digest("hex");
    const whole = new Sha256();
    whole.update(b);
    assert.equal(whole.hex(), want, `${n} bytes whole`);
    const bytewise = new Sha256();
    for (let i = 0; i < n; i++) bytewise.update(b.subarray(i, i + 1));
    assert.equal(bytewise.hex(), want, `${n} bytes one at a time`);
  }
  // 3 MiB in uneven steps, as hashParts feeds it.
  const big = randomBytes(3 << 20);
  const h = new Sha256();
  for (let o = 0, step = 1; o < big.length; o += step, step = 1 + ((step * 7 + 13) % 150_000)) h.update(big.subarray(o, o + step));
  assert.equal(h.hex(), createHash("sha256").update(big).digest("hex"));
});

// The resume of an upload whose parts a commit assembled, then was cut
// short (503): every part received, none to send. The plan fits the
// file, nothing is sent (no request at all: there is no service here),
// and the progress reports the whole file, held.
test("ResumeOfAnAssembledUploadSendsNothing", async () => {
  const size = 11 * (1 << 20) + 123;
  const partBytes = 5 << 20;
  const f = new File([new Uint8Array(size)], "big.bin");
  const up = {
    upload_id: id,
    expires_at: new Date(Date.now() + 15 * 60_000).toISOString(),
    multipart: {
      part_bytes: partBytes,
      part_count: 3,
      received: [1, 2, 3].map((n) => ({ part_number: n, size: Math.min(partBytes, size - (n - 1) * partBytes) })),
      parts: [],
    },
  };
  assert.equal(checkPlan("resume", up, f).parts.length, 0);
  const seen = [];
  await putParts({ attempts: 1 }, up, f, { inFlight: 4, onFileProgress: (n) => seen.push(n) });
  assert.deepEqual(seen, [size]);
});

// pendingFile: the attachment URIs the service gives (and the legacy
// content path) name a file; any other URI is not the service's.
test("PendingFile", () => {
  const ws = "7c1e6a2e-3b1f-4c5d-9e8f-0a1b2c3d4e5f";
  assert.deepEqual(pendingFile(`platform-pending:${ws}/${id}`), { workspaceId: ws, fileId: id });
  assert.deepEqual(pendingFile(`/workspaces/${ws}/content/${id}/content`), { workspaceId: ws, fileId: id });
  for (const other of ["https://example.com/a.pdf", "/workspace/report.pdf", `platform-pending:${ws}`, `platform-pending:${ws}/${id}/x`, "", null]) {
    assert.equal(pendingFile(other), null, String(other));
  }
});

// The service's Retry-After (delta-seconds) is carried on the error of a
// 503 or 429, as milliseconds; an HTTP-date is ignored, a huge value
// read as a day.
test("RetryAfterCarried", () => {
  const unavailable = JSON.stringify({ error: "storage unavailable, retry shortly", code: "unavailable" });
  assert.equal(httpError("ack", 503, unavailable, "5").retryAfterMs, 5000);
  assert.equal(httpError("ack", 429, "", " 1 ").retryAfterMs, 1000);
  assert.equal(httpError("ack", 503, unavailable, null).retryAfterMs, null);
  assert.equal(httpError("ack", 503, unavailable, "Wed, 21 Oct 2026 07:28:00 GMT").retryAfterMs, null);
  assert.equal(httpError("ack", 500, "", "5").retryAfterMs, null, "a 500 asks nothing");
  assert.equal(httpError("ack", 404, "", "5").retryAfterMs, null);
  assert.equal(retryAfterMs("-1"), null);
  assert.equal(retryAfterMs("1.5"), null);
  assert.equal(retryAfterMs("9999999999"), 86_400_000);
  assert.equal(new PendingUploadsError("x").retryAfterMs, null);
});

// unavailable is a 503 that asks to come back after ms.
function unavailable(ms) {
  return new PendingUploadsError("the upload service is unavailable right now", { status: 503, code: "http", retryAfterMs: ms });
}

// A 503 with Retry-After is tried again past the default 3 attempts, up
// to 7 (at Retry-After: 5, the last 30 s after the first, past a resume
// of about 30 s); without one, 3 as before; the caller's attempts stay
// the cap.
test("RetryAfterKeepsTrying", async () => {
  const failing = (failures, err) => {
    let tries = 0;
    const fn = async () => {
      tries++;
      if (tries <= failures) throw err();
      return "served";
    };
    return { fn, tries: () => tries };
  };
  let f = failing(6, () => unavailable(1));
  assert.equal(await withRetries("ack", undefined, undefined, f.fn), "served");
  assert.equal(f.tries(), 7);

  f = failing(7, () => unavailable(1));
  await assert.rejects(withRetries("ack", undefined, undefined, f.fn), (e) => e.status === 503);
  assert.equal(f.tries(), 7, "at most 7 tries");

  f = failing(5, () => unavailable(null));
  await assert.rejects(withRetries("ack", undefined, undefined, f.fn), (e) => e.status === 503);
  assert.equal(f.tries(), 3, "without Retry-After: the default 3");

  f = failing(5, () => unavailable(1));
  await assert.rejects(withRetries("ack", 2, undefined, f.fn), (e) => e.status === 503);
  assert.equal(f.tries(), 2, "the caller's attempts are the cap");
});

// The caller's signal cuts a Retry-After wait short.
test("RetryAfterWaitAborted", async () => {
  const ctl = new AbortController();
  let tries = 0;
  const call = withRetries("ack", undefined, ctl.signal, async () => {
    tries++;
    setTimeout(() => ctl.abort(), 0);
    throw unavailable(10_000);
  });
  await assert.rejects(call, (e) => e.code === "aborted");
  assert.equal(tries, 1);
});
