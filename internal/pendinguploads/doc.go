// Package pendinguploads stores chat uploads bound for workspaces that
// cannot be called back: the platform stages files (Stage, or Presign and
// Commit for files put straight into the bucket), the workspace polls
// (List), fetches (Fetch, then Open) and acknowledges (Ack), and a
// schedule deletes what is acked or expired (Sweep).
//
// One row of pending_uploads per file. Its bytes sit either inline in the
// row (bytea) or, with a bucket and a file larger than
// Store.InlineMaxBytes, in an object whose key the Store chooses. Callers
// never need to know which: Open reads the bytes either way, and the
// bucket is the Store's alone.
//
// Visibility: a row is listed while it is unacked and unexpired; Fetch
// also serves it once acked, until the sweep. Every call that names a
// file also names the workspace, and no statement reads a row of another
// workspace: such a file is ErrNotFound, as one that is not there (HTTP:
// the same 404), and nothing of it leaves the database.
//
// Lifecycle of a row:
//
//	Stage, Commit   created (acked_at NULL, expires_at = now + TTL), with
//	                an activity_logs row in the same transaction
//	Fetch           fetched_at = now (every fetch; the latest wins)
//	Ack             acked_at = now (first ack only)
//	Sweep           deleted once acked longer than the retention, or
//	                unacked past expires_at
//
// Who may act: every statement that reads or writes a workspace's files
// is built from an access, which only Store.access makes (auth's check
// refuses, before any I/O, an identity no check settled), sent by it
// (access.send: the caller's look-up and arguments added), and names the
// condition callerMayAct in its SQL, where it is written, over named
// arguments (pgx.StrictNamedArgs: a statement that does not name the
// condition is refused unsent). At each level of a statement that reads
// or writes those rows, the condition names the rows as well as the
// caller: workspace_id = @workspace AND callerMayAct (an INSERT writes
// @workspace as the rows' workspace_id); callermayact_test.go holds every
// statement to it, read by Postgres's own parser. Open and SignGet read only a file that
// Fetch found (Fetched). Only the sweep's statements, and those applying
// a malware scan's verdict (scan.go: the scanner's, by object key), act
// without a caller, for the schedule or the scanner.
//
// Where to look, every file: store.go (Store, New, its Settings), record.go (Record: a file without its bytes),
// bucket.go (Bucket: what the Store needs of S3), access.go (who may
// act: access, the round trip it sends, the bearer tokens' SQL, the
// condition callerMayAct, Verify), stage.go (Stage, top to bottom: its
// records and object keys, the quota beside the INSERT it guards, the
// INSERT Commit shares, the objects' cleanup), turn.go (a workspace's
// turn in the process: its calls wait in memory, holding no connection), presign.go (Presign: its rows, its
// multipart uploads, its signed PUTs), commit.go (Commit: the look-ups,
// copies and claim, and the presigned upload's type and staging key),
// multipart.go (Resume, Abort of an upload in parts), fetch.go (Fetch,
// Open, SignGet), list.go (List and its Cursor), ack.go (Ack), sweep.go
// (Sweep, and the objects of rows that never committed), totals.go (the
// quota's running totals: what keeps them, Recount), backlog.go
// (Backlog: the sweep's metrics), scan.go (a scanned deployment's files
// held back until their malware scan's verdict: Decide, DecideOverdue,
// HeldScans, ScanStates; docs/scanning.md), notify.go (the Notifier told of files
// once stored: push's hints), helpers.go (small pure helpers),
// errors.go (the errors, and which of them mean a dependency is
// unavailable).
//
// A Store is safe for concurrent use.
package pendinguploads
