// Package pendinguploads stores chat uploads bound for workspaces that
// cannot be called back: the platform stages files, the workspace polls
// (List), fetches (Get, MarkFetched) and acknowledges (Ack), and a schedule
// deletes what is acked or expired (Sweep).
//
// One row of pending_uploads per file. Its bytes sit either inline in the
// row (bytea) or, with a Blobs store configured and the file larger than
// Store.InlineMaxBytes, in an object whose key the Store chooses. Callers
// never need to know which: Record.Open returns the bytes either way.
//
// Visibility: a row is visible while it is unacked and unexpired. Get,
// MarkFetched and List see only visible rows; Ack also recognises an
// already-acked row so that an at-least-once retry succeeds. Every call
// that names a file also names the workspace, and a row of another
// workspace is reported as ErrWrongWorkspace (which HTTP answers as 404)
// without its bytes ever leaving the database.
//
// Lifecycle of a row:
//
//	PutBatch        created (acked_at NULL, expires_at = now + TTL)
//	MarkFetched     fetched_at = now (every fetch; the latest wins)
//	Ack             acked_at = now (first ack only)
//	Sweep           deleted once acked longer than the retention, or
//	                unacked past expires_at
//
// A Store is safe for concurrent use.
package pendinguploads
