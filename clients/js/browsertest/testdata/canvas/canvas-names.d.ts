// The platform canvas's names that the docs' drop-ins use, as its
// uploads.ts and api.ts declare them (PLATFORM.md, "The canvas"): the
// docs' code blocks are type-checked against these and the client's own
// pendinguploads.d.ts (TestDocsCodeBlocks). A script, not a module: its
// names are global, as an import of the canvas's own would make them.

/** The platform's origin; empty on the same origin. */
declare const PLATFORM_URL: string;

/** The canvas's own gate on a file's size. */
declare const MAX_UPLOAD_BYTES: number;

/** What the canvas throws above MAX_UPLOAD_BYTES, before any request. */
declare class FileTooLargeError extends Error {
  constructor(name: string, size: number);
}

/** X-Molecule-Org-Slug on a tenant host, a bearer in local development. */
declare function platformAuthHeaders(): Record<string, string>;

/** An attachment of a chat message. */
interface ChatAttachment {
  uri: string;
  name: string;
  mimeType: string;
  size: number;
}
