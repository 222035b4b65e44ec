// Type declarations of pendinguploads.js.

/** The answer of GET {api}/uploads/limits. */
export interface Limits {
  per_file_bytes: number;
  per_request_bytes: number;
  max_attachments_per_message: number;
  /** Whether the server offers presigned uploads (it has a bucket). */
  presign: boolean;
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
  /** File bytes sent so far, over all files. */
  loaded: number;
  /** The sum of the files' sizes. */
  total: number;
  /** Which file moved: its index in the input, the file, its own count. */
  index: number;
  file: Blob;
  fileLoaded: number;
  fileTotal: number;
}

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
  /** 409: the workspace's quota on what waits; body names the quota, limit, pending and adding. */
  | "quota_exceeded";

export declare class PendingUploadsError extends Error {
  constructor(
    message: string,
    init?: { status?: number; body?: unknown; code?: PendingUploadsErrorCode; cause?: unknown; staged?: StagedFile[] },
  );
  readonly name: "PendingUploadsError";
  /** The HTTP status; 0 when no answer arrived or the check was local. */
  status: number;
  /** The parsed JSON error body ({error, …}), when there was one. */
  body: any;
  code: PendingUploadsErrorCode;
  /** Files that earlier requests of the same call staged (kept by the server). */
  staged: StagedFile[];
}

export interface RequestOptions {
  signal?: AbortSignal;
  /** Attempts of a request that is safe to repeat (default 3, at most 6). */
  attempts?: number;
}

export interface UploadOptions extends RequestOptions {
  onProgress?: (p: UploadProgress) => void;
  /** Skip GET /uploads/limits and use these. */
  limits?: Limits;
}

export declare function getLimits(api: string, options?: RequestOptions): Promise<Limits>;

/**
 * Stages files for workspaceId: small ones together as multipart, large
 * ones through presign, a PUT to the bucket and a commit.
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
  /** Hex SHA-256 of the bytes (checked against Content-Digest when present). */
  sha256: string | null;
}

export declare function downloadFile(
  api: string,
  token: string | null,
  workspaceId: string,
  fileId: string,
  options?: { signal?: AbortSignal },
): Promise<DownloadedFile>;

export declare function ack(
  api: string,
  token: string | null,
  workspaceId: string,
  fileId: string,
  options?: RequestOptions,
): Promise<{ acked: boolean; raced?: boolean }>;
