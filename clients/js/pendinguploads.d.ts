// Type declarations of pendinguploads.js, the client's one import (the
// modules beside it are its own: README.md, "The modules").

/** The answer of GET {api}/uploads/limits. */
export interface Limits {
  per_file_bytes: number;
  per_request_bytes: number;
  max_attachments_per_message: number;
  /** Whether the server offers presigned uploads (it has a bucket). */
  presign: boolean;
  /**
   * A presigned file above this many bytes goes in parts of
   * multipart_part_bytes. null (or absent, in limits a caller passes):
   * the server takes no parts, every presigned file is one PUT.
   */
  multipart_threshold_bytes?: number | null;
  multipart_part_bytes?: number | null;
}

/** Caps assumed when the server predates GET /uploads/limits (404). */
export declare const DEFAULT_LIMITS: Readonly<Limits>;

/** One file of the upload route's answer. */
export interface StagedFile {
  file_id: string;
  /** platform-pending:<workspaceId>/<fileId> */
  uri: string;
  /** The sanitized name. */
  name: string;
  mimeType: string;
  size: number;
  /** Hex SHA-256 of the bytes the server stored. */
  sha256: string;
}

/** The upload route's answer: files in input order. */
export interface UploadResult {
  files: StagedFile[];
}

export interface UploadProgress {
  /** File bytes sent so far, over all files; never goes back (bytes sent again count once). */
  loaded: number;
  /** The sum of the files' sizes. */
  total: number;
  /** Which file moved: its index in the input, the file, its own count. */
  index: number;
  file: Blob;
  fileLoaded: number;
  fileTotal: number;
}

/**
 * What went wrong, stable across versions (README.md, "Error codes"):
 * "http", an error answer no other code names (body is its JSON, the
 * service's own code in body.code); "network", no answer (0); "timeout",
 * no byte moved or no answer in time; "aborted", the caller's signal;
 * "invalid", an argument refused before sending; "empty", a file of 0
 * bytes; "too_large", over the per-file cap or one request (before
 * sending, or the service's 413); "digest_mismatch", the answer's
 * SHA-256 is not the file's, or the bucket refused a part's bytes for
 * their checksum; "bad_response", a 2xx answer not as the API says;
 * "quota_exceeded", the service's 409: the workspace's quota on what
 * waits (body names the quota, limit, pending and adding); "blocked", a
 * malware scan found a threat in a file, or an administrator refused one
 * its scan could not decide (reason "operator"), never delivered
 * (whenScanned; body.files the states); "held", the server holds a file its scan could
 * not decide, for an administrator.
 */
export type PendingUploadsErrorCode =
  | "http"
  | "network"
  | "timeout"
  | "aborted"
  | "invalid"
  | "empty"
  | "too_large"
  | "digest_mismatch"
  | "bad_response"
  | "quota_exceeded"
  | "blocked"
  | "held";

/**
 * Every failure of the module. message is a sentence a person can read as
 * it is (quota, per-file cap, service or storage unavailable); branch on
 * code, never on the message.
 */
export declare class PendingUploadsError extends Error {
  constructor(
    message: string,
    init?: {
      status?: number;
      body?: unknown;
      code?: PendingUploadsErrorCode;
      cause?: unknown;
      staged?: StagedFile[];
      retryAfterMs?: number | null;
    },
  );
  /**
   * "TimeoutError" for code "timeout" (a transfer that stalled, a request
   * unanswered) and for an abort whose signal's reason is a TimeoutError
   * (AbortSignal.timeout); "PendingUploadsError" otherwise. Callers that
   * tell a slow connection by the name (as the canvas does) keep working.
   */
  readonly name: "PendingUploadsError" | "TimeoutError";
  /** The HTTP status; 0 when no answer arrived or the check was local. */
  status: number;
  /**
   * The parsed JSON error body ({error, code, …}), when there was one:
   * code is the service's (docs/API.md's table of error codes), absent
   * from a server older than codes; for the bucket's answer, {code} with
   * S3's (SlowDown, BadDigest, …).
   */
  body: any;
  code: PendingUploadsErrorCode;
  /** Files that earlier requests of the same call staged (kept by the server). */
  staged: StagedFile[];
  /**
   * How long the service's 503 or 429 asked to wait before the request
   * is sent again (its Retry-After, delta-seconds, in milliseconds; an
   * HTTP-date is ignored); null when it asked nothing, and for every
   * other error. The retried calls wait at least this much between
   * tries (see RequestOptions.attempts); the multipart upload, never
   * retried, leaves it to the caller.
   */
  retryAfterMs: number | null;
}

/**
 * Where uploadFiles remembers a file's upload in parts, for a later call
 * (after a failure, in a reloaded page) to resume it. key is a
 * fingerprint of the workspace and the file's name, size and
 * lastModified; the value is plain JSON. Methods may be sync or async;
 * a store that throws costs the resume, never the upload.
 */
export interface ResumeStore {
  get(key: string): ResumeEntry | null | undefined | Promise<ResumeEntry | null | undefined>;
  set(key: string, value: ResumeEntry): void | Promise<void>;
  delete(key: string): void | Promise<void>;
}

/** What a ResumeStore holds for one file. */
export interface ResumeEntry {
  upload_id: string;
  part_bytes: number;
  /** The file's SHA-256 (hex), checked against the commit's answer; null without SubtleCrypto. */
  sha256: string | null;
  /** RFC 3339. */
  saved_at: string;
}

/**
 * The default ResumeStore: localStorage, keys "pendinguploads.resume:…";
 * entries older than a day are removed whenever one is set. Remembers
 * nothing where there is no localStorage.
 */
export declare const localResumeStore: ResumeStore;

/** Extra headers for the service: an object, or a function called anew for each request. */
export type ServiceHeaders =
  | Record<string, string>
  | (() => Record<string, string> | Promise<Record<string, string>>);

export interface RequestOptions {
  signal?: AbortSignal;
  /**
   * Attempts of a request that is safe to repeat (default 3, at most 6).
   * A 503 or 429 with Retry-After (a database resuming from its pause)
   * waits max(backoff, Retry-After), at most 10 s a wait, and is tried
   * up to 7 times when attempts is not given (attempts stays the cap
   * when it is), while the waits together stay within 30 s. The
   * multipart upload is never retried: its answer may be lost after the
   * files were stored.
   */
  attempts?: number;
  /**
   * Sent with every request to the service (as the canvas's
   * platformAuthHeaders(): X-Molecule-Org-Slug, a bearer in local
   * development), never to the bucket. The token's Authorization and the
   * request's own Content-Type win over them.
   */
  headers?: ServiceHeaders;
  /**
   * The fetch credentials mode of the requests to the service: default
   * "include" when token is null (the session cookie is the credential),
   * "omit" with a token. Presigned PUTs to the bucket never carry
   * credentials.
   */
  credentials?: RequestCredentials;
}

export interface UploadOptions extends RequestOptions {
  onProgress?: (p: UploadProgress) => void;
  /** Skip GET /uploads/limits and use these. */
  limits?: Limits;
  /** Parts of a file in flight at once (default 4, at most 16). */
  partsInFlight?: number;
  /** Where uploads in parts are remembered for a resume (default localResumeStore; null: nowhere). */
  resumeStore?: ResumeStore | null;
  /**
   * A transfer (a PUT, a part, a multipart request) during which no byte
   * moves for this long is given up, retried like a lost connection, and
   * once the attempts are spent the call rejects with a "TimeoutError".
   * Default: max(60 s, the transfer's bytes / 100 KB/s), the canvas's
   * floor.
   */
  stallTimeoutMs?: number;
}

export declare function getLimits(api: string, options?: RequestOptions): Promise<Limits>;

/**
 * Stages files for workspaceId: small ones together as multipart, large
 * ones through presign, a PUT to the bucket and a commit; those above
 * multipart_threshold_bytes in parts, partsInFlight at a time, each part
 * retried on its own, resumed from resumeStore by a later call with the
 * same file. Aborting signal drops on the server what the call presigned.
 *
 * token is a bearer token (admin, org or workspace), or null for session
 * mode: the page's control-plane session cookie goes with every request
 * to the service instead (credentials "include"), as the canvas sends it
 * in production. The same holds for downloadFile and ack.
 */
export declare function uploadFiles(
  api: string,
  token: string | null,
  workspaceId: string,
  files: Iterable<File | Blob> | ArrayLike<File | Blob>,
  options?: UploadOptions,
): Promise<UploadResult>;

export interface DownloadedFile {
  blob: Blob;
  name: string;
  mimeType: string;
  size: number;
  /** Hex SHA-256 of the bytes (checked against Repr-Digest, or an older server's Content-Digest, when present). */
  sha256: string | null;
}

export interface DownloadOptions extends Pick<RequestOptions, "signal" | "headers" | "credentials"> {
  /**
   * Give the download up (code "timeout", name TimeoutError) when no byte
   * moves for this long; default max(60 s, the file's bytes / 100 KB/s),
   * as an upload's.
   */
  stallTimeoutMs?: number;
  /** The bytes received so far, and Content-Length (0 when absent). */
  onProgress?: (p: { loaded: number; total: number }) => void;
}

/**
 * Fetches a staged file's bytes into the page (a Blob): for a file the
 * page itself reads. To save a file, use openFile.
 */
export declare function downloadFile(
  api: string,
  token: string | null,
  workspaceId: string,
  fileId: string,
  options?: DownloadOptions,
): Promise<DownloadedFile>;

export interface OpenOptions extends Pick<RequestOptions, "signal" | "headers" | "credentials" | "attempts"> {
  /** false: only return the link (a navigation of your own). Default true where there is a document, false without (a worker, node). */
  navigate?: boolean;
}

export interface OpenedFile {
  /** The download link, absolute: it opens with a bare GET until expiresAt. */
  url: string;
  /** RFC 3339. */
  expiresAt: string;
}

/**
 * Opens a staged file in the browser's own download manager: asks the
 * service for a download link (with headers and credentials as
 * uploadFiles takes them) and navigates a hidden anchor to it. The file
 * streams to disk with the browser's progress and resume, never through
 * the page's memory. Resolves once the navigation started.
 */
export declare function openFile(
  api: string,
  token: string | null,
  workspaceId: string,
  fileId: string,
  options?: OpenOptions,
): Promise<OpenedFile>;

export declare function ack(
  api: string,
  token: string | null,
  workspaceId: string,
  fileId: string,
  options?: RequestOptions,
): Promise<{ acked: boolean; raced?: boolean }>;

/** One file's malware scan state (docs/API.md, the scan route). */
export interface FileScan {
  file_id: string;
  state: "pending" | "clean" | "blocked" | "held" | "not_found";
  /** Why blocked or held, or why delivered without a clean scan (the server's policy, or an operator's release). */
  reason?: "threats_found" | "unsupported" | "access_denied" | "failed" | "timeout" | "operator";
}

/** The state of each file (IDs, or staged files; 1 to 64), in the order asked. */
export declare function scanStates(
  api: string,
  token: string | null,
  workspaceId: string,
  files: Array<string | Pick<StagedFile, "file_id">>,
  options?: Pick<RequestOptions, "signal" | "headers" | "credentials" | "attempts">,
): Promise<FileScan[]>;

export interface ScanWaitOptions extends Pick<RequestOptions, "signal" | "headers" | "credentials" | "attempts"> {
  /** How often to ask (default 1000 ms, at least 200). */
  intervalMs?: number;
  /** How long to wait at most (default 16 minutes). */
  waitMs?: number;
}

/**
 * Waits until no file is pending its malware scan; resolves with the
 * states once every file is delivered, rejects with code "blocked"
 * (malware found, or refused by an administrator), "held" (kept for an administrator) or "timeout", the
 * message a sentence naming the files. A server that does not scan
 * answers at once.
 */
export declare function whenScanned(
  api: string,
  token: string | null,
  workspaceId: string,
  files: Array<string | Pick<StagedFile, "file_id" | "name">>,
  options?: ScanWaitOptions,
): Promise<FileScan[]>;

/** A file of the service that an attachment URI names. */
export interface PendingFileRef {
  workspaceId: string;
  fileId: string;
}

/**
 * Reads an attachment URI of the service, as the canvas keeps them:
 * platform-pending:<workspaceId>/<fileId> (StagedFile.uri), or the legacy
 * /workspaces/<workspaceId>/content/<fileId>/content; null for any other
 * URI (an http(s) URL, a container path), which is not the service's.
 */
export declare function pendingFile(uri: string): PendingFileRef | null;
