// The server's limits: GET {api}/uploads/limits, checked, and the caps
// assumed when a server predates the route.

import { PendingUploadsError } from "./errors.js";
import { service, serviceJSON, trimBase, withRetries } from "./http.js";

/** Caps assumed when the server predates GET /uploads/limits (404). */
export const DEFAULT_LIMITS = Object.freeze({
  per_file_bytes: 25 * 1024 * 1024,
  per_request_bytes: 4 * 1024 * 1024,
  max_attachments_per_message: 64,
  presign: true,
  multipart_threshold_bytes: null,
  multipart_part_bytes: null,
});

// The upload route refuses more than 64 files in one request.
export const MAX_FILES_PER_REQUEST = 64;

// checkLimits checks an answer of the limits route (or the limits a
// caller passes) and returns them complete.
export function checkLimits(v) {
  const n = (x) => typeof x === "number" && Number.isSafeInteger(x) && x > 0;
  if (!v || !n(v.per_file_bytes) || !n(v.per_request_bytes) || typeof v.presign !== "boolean") {
    throw new PendingUploadsError("limits: the answer lacks per_file_bytes, per_request_bytes or presign", { status: 200, body: v, code: "bad_response" });
  }
  // Parts only where the server says both (null: a server without a
  // bucket, or one that predates them).
  const parts = v.presign && n(v.multipart_threshold_bytes) && n(v.multipart_part_bytes);
  return {
    per_file_bytes: v.per_file_bytes,
    per_request_bytes: v.per_request_bytes,
    max_attachments_per_message: n(v.max_attachments_per_message) ? v.max_attachments_per_message : MAX_FILES_PER_REQUEST,
    presign: v.presign,
    multipart_threshold_bytes: parts ? v.multipart_threshold_bytes : null,
    multipart_part_bytes: parts ? v.multipart_part_bytes : null,
  };
}

/**
 * Reads GET {api}/uploads/limits (public, no token). A server that does
 * not have the route (404) is taken to have DEFAULT_LIMITS. headers and
 * credentials, as uploadFiles takes them, go with it.
 */
export async function getLimits(api, { signal, attempts, headers, credentials } = {}) {
  const op = "limits";
  const svc = service(op, api, null, "", { headers, credentials: credentials || "omit" });
  try {
    return checkLimits(await withRetries(op, attempts, signal, () => serviceJSON(op, svc, `${trimBase(api)}/uploads/limits`, { signal })));
  } catch (err) {
    // No such route (the status says it: a server that predates the
    // route may predate codes too, or answer through a proxy's page).
    if (err instanceof PendingUploadsError && err.status === 404) return { ...DEFAULT_LIMITS };
    throw err;
  }
}
