// Package client is the Go client of the pendinguploads HTTP API (API.md):
// the platform stages files for a workspace with Upload; the workspace
// lists them with List, fetches them with Fetch or Download, and acks
// them with Ack; a Puller does all of that into a directory, crash safely.
//
//	c, err := client.New("https://api.example.com", token)
//	staged, err := c.Upload(ctx, ws, []client.UploadFile{f})
//	files, err := c.List(ctx, ws)
//	res, err := client.NewPuller(c, ws, "/srv/inbox").Pull(ctx)
//
// # Uploads
//
// Upload sends files that fit the server's request cap (MAX_REQUEST_BYTES,
// 4 MiB by default) as multipart/form-data, and larger ones through
// presign, a PUT straight to the bucket (with exactly the presigned
// headers, never the Authorization header), and a JSON commit. A server
// without a bucket answers presign with 404; the large file is then sent
// as multipart on its own, which a server with a raised cap accepts, and
// otherwise the error wraps ErrTooLarge. A 413 "request body too large"
// carries the server's cap in "max": the client learns it and repacks.
//
// # Errors and retries
//
// Every 4xx/5xx answer is an *APIError (Status, Message, Code, Fields);
// IsNotFound, IsUnauthorized, IsUnavailable and IsTooLarge classify them.
// A request that got no answer is a *TransportError. Calls that are safe
// to repeat are retried on connection errors, 503, 429, 502 and 504 with
// bounded exponential backoff and jitter (RetryPolicy), honouring
// Retry-After and the context: list, content, ack (idempotent by
// contract), presign (nothing is visible until commit) and the presigned
// PUT (same bytes, same key). Upload and commit are never retried: an
// answer lost after the server committed would make a second try stage
// the files twice. Every call is bounded by its context and by nothing
// else; set a deadline.
//
// The token goes only to the API's host: the client follows content's 307
// to the bucket itself, without Authorization, and refuses a redirect
// from https to http. Errors never contain the token, and the query of a
// presigned URL (its signature) is cut from transport errors.
//
// # Pull: crash safety
//
// A Puller delivers into a directory D, keeping its state in
// D/.pendinguploads (mode 0700), so that a crash at any point neither
// loses a file nor, after the next pull, leaves two copies of it. For
// each pending upload, in list order:
//
//  1. Download to D/.pendinguploads/<file_id>.part (0600), hashing and
//     counting as it streams; the size must equal the list's size and
//     Content-Length, the SHA-256 the list's sha256 and the Content-Digest
//     header (each where given). On any mismatch the .part is deleted and
//     the upload is left unacked: an error, not a file. Then fsync. A
//     .part already there (a download cut short) is resumed: its bytes
//     are hashed, the rest asked for with Range: bytes=<have>-, and the
//     whole file verified as above.
//  2. Choose the final name: internal/sanitize.Filename of the server's
//     name (sanitized again: the client writes to disk), or name-1.ext,
//     name-2.ext, … if taken.
//  3. Write the delivery record D/.pendinguploads/<file_id>.record
//     ({file_id, name, final, size, sha256}) atomically: temp file, fsync,
//     rename, fsync of the folder. This is the commit point: from here on
//     the file is never downloaded again.
//  4. Place it: link(.part, D/final), which fails rather than replace a
//     file that appeared meanwhile (then another name is recorded and
//     tried), fsync D, remove the .part, fsync the state folder. (Where
//     the file system has no hard links, rename is used after a check.)
//  5. Ack (retried; idempotent). Then remove the record.
//
// Every pull begins with recovery, before it lists: for each record, if
// its .part still exists and D/final is the same file (a crash between
// link and removal), the .part is removed; if D/final is absent, the
// .part is placed; if D/final is another file, a new name is recorded and
// the .part placed there. A record without a .part was placed already.
// Then the upload is acked (a 404 means expired or swept: the file is
// kept) and the record removed. A .part without a record is a download
// cut short: the upload being still unacked, step 1 resumes it; once the
// list no longer shows the upload, it is deleted. So a crash before step
// 3 costs at most the bytes in flight and nothing else; a
// crash after it costs nothing at all; and no upload is acked before its
// file is durable in D. A lock file (flock) keeps two pulls out of one
// directory. Removing D/.pendinguploads while a record is in it gives up
// that guarantee for the recorded files (the next pull fetches them again).
package client
