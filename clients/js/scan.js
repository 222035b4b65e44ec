// Malware scanning, the sender's side: on a server that scans
// (docs/scanning.md), a staged file reaches the workspace only once its
// scan says clean. scanStates asks the scan route for each file's state;
// whenScanned waits until none is pending and turns "blocked" (and
// "held") into a PendingUploadsError whose message a person reads as it
// is, after the chat's "Upload failed: ".

import { PendingUploadsError, abortedError } from "./errors.js";
import { service, serviceJSON, withRetries, wsURL } from "./http.js";

// The most files one question names (the route's cap: a request's files).
const MAX_FILES = 64;
// How often whenScanned asks, and for how long at most by default: the
// server holds a file whose scan does not answer within its SCAN_TIMEOUT
// (15 minutes by default), so a wait past that learns "held".
const DEFAULT_INTERVAL_MS = 1000;
const MIN_INTERVAL_MS = 200;
const DEFAULT_WAIT_MS = 16 * 60 * 1000;

/**
 * Asks the scan route for the state of each file (file IDs, or staged
 * files with file_id; 1 to 64). Resolves with
 * [{file_id, state, reason?}] in the order asked: state is "pending",
 * "clean", "blocked", "held" or "not_found"; reason (docs/API.md's
 * table) says why a file is blocked or held. headers, credentials,
 * attempts and signal as uploadFiles takes them.
 */
export async function scanStates(api, token, workspaceId, files, { signal, attempts, headers, credentials } = {}) {
  const op = "scan";
  const ids = idsOf(op, files);
  const svc = service(op, api, token, workspaceId, { headers, credentials });
  const q = ids.map((id) => "file_id=" + encodeURIComponent(id)).join("&");
  const answer = await withRetries(op, attempts, signal, () =>
    serviceJSON(op, svc, wsURL(api, workspaceId, "chat", "uploads", "scan") + "?" + q, { signal }),
  );
  if (!answer || !Array.isArray(answer.files) || answer.files.length !== ids.length) {
    throw new PendingUploadsError(`${op}: the answer is not one state per file`, { code: "bad_response" });
  }
  return answer.files;
}

/**
 * Waits until no file of files (uploadFiles' staged files, or their IDs)
 * is pending its malware scan, asking every intervalMs (default 1 s), at
 * most waitMs (default 16 minutes: past the server's own bound, which
 * holds a file whose scan does not answer). Resolves with the states when
 * every file is delivered ("clean"). Rejects with a PendingUploadsError:
 * code "blocked" when a scan found malware in a file (never delivered),
 * "held" when the server holds one for a check, "timeout" when the wait
 * ran out, each with a sentence naming the file; body.files is the
 * states. A server that does not scan answers "clean" at once.
 */
export async function whenScanned(api, token, workspaceId, files, { signal, attempts, headers, credentials, intervalMs, waitMs } = {}) {
  const op = "scan";
  const names = new Map();
  for (const f of Array.isArray(files) ? files : []) if (f && typeof f === "object") names.set(f.file_id, f.name);
  const every = Math.max(MIN_INTERVAL_MS, intervalMs || DEFAULT_INTERVAL_MS);
  const until = Date.now() + (waitMs || DEFAULT_WAIT_MS);
  for (;;) {
    const states = await scanStates(api, token, workspaceId, files, { signal, attempts, headers, credentials });
    const nameOf = (s) => names.get(s.file_id) || s.file_id;
    const blocked = states.filter((s) => s.state === "blocked");
    if (blocked.length > 0) {
      const which = blocked.map((s) => `“${nameOf(s)}”`).join(", ");
      const one = blocked.length === 1;
      // reason "operator": an administrator blocked a file its scan could
      // not decide (pendingctl scans block); no threat was found in it.
      const byOperator = blocked.filter((s) => s.reason === "operator").length;
      const why =
        byOperator === 0
          ? "a malware scan found a threat"
          : byOperator === blocked.length
            ? `an administrator refused ${one ? "it" : "them"} after the malware scan could not decide`
            : "a malware scan found a threat, or an administrator refused what the scan could not decide";
      throw new PendingUploadsError(
        `${which} ${one ? "was" : "were"} refused as unsafe: ${why}, and nothing of ${one ? "it" : "them"} reached the workspace`,
        { code: "blocked", body: { files: states } },
      );
    }
    const held = states.filter((s) => s.state === "held");
    if (held.length > 0) {
      const which = held.map((s) => `“${nameOf(s)}”`).join(", ");
      throw new PendingUploadsError(`${which} could not be checked for malware and ${held.length === 1 ? "waits" : "wait"} for an administrator; the workspace does not have ${held.length === 1 ? "it" : "them"} yet`, {
        code: "held",
        body: { files: states },
      });
    }
    const gone = states.filter((s) => s.state === "not_found");
    if (gone.length > 0) {
      throw new PendingUploadsError(`${gone.map((s) => `“${nameOf(s)}”`).join(", ")}: no longer on the server (expired)`, { code: "http", status: 404, body: { files: states } });
    }
    if (!states.some((s) => s.state === "pending")) return states;
    if (Date.now() + every > until) {
      throw new PendingUploadsError("the malware scan of the files did not answer in time; they have not reached the workspace yet", { code: "timeout", body: { files: states } });
    }
    await pause(every, signal, op);
  }
}

function idsOf(op, files) {
  if (!Array.isArray(files) || files.length === 0 || files.length > MAX_FILES) {
    throw new PendingUploadsError(`${op}: want 1 to ${MAX_FILES} files`, { code: "invalid" });
  }
  return files.map((f) => {
    const id = typeof f === "string" ? f : f && f.file_id;
    if (typeof id !== "string" || !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) {
      throw new PendingUploadsError(`${op}: ${JSON.stringify(id)} is not a file_id`, { code: "invalid" });
    }
    return id;
  });
}

function pause(ms, signal, op) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(abortedError(op, signal));
    const t = setTimeout(done, ms);
    function done() {
      if (signal) signal.removeEventListener("abort", onAbort);
      resolve();
    }
    function onAbort() {
      clearTimeout(t);
      reject(abortedError(op, signal));
    }
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
  });
}
