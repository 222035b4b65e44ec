// Package client is the Go client of the pendinguploads HTTP API (API.md):
// the platform stages files for a workspace with Upload; the workspace
// lists them with List, fetches them with Fetch or Download (Resume
// finishes a download cut short), and acks them with Ack. Package
// client/inbox builds on it: a Puller that does all of that into a
// directory, crash safely.
//
//	c, err := client.New("https://api.example.com", token)
//	staged, err := c.Upload(ctx, ws, []client.UploadFile{f})
//	files, err := c.List(ctx, ws)
//
// It is a module of its own, for Go 1.25 and later, that brings nothing
// of the server (no database driver, no AWS SDK; deps_test.go holds it):
//
//	go get github.com/pendinguploads/pendinguploads/client@v0.1.0
//
// A release is the repository's tag of its version prefixed with the
// module's folder, as Go finds a module in a subfolder (docs/clients.md);
// any commit works too (go get …/client@COMMIT).
//
// # Uploads
//
// Upload sends files that fit the server's request cap (MAX_REQUEST_BYTES,
// 4 MiB by default) as multipart/form-data, and larger ones through
// presign, a PUT straight to the bucket (with exactly the presigned
// headers, never the Authorization header), and a JSON commit. A file
// above the server's multipart threshold (GET /uploads/limits) goes in
// parts: each part's SHA-256 is declared at presign (the file is read
// once, part by part, so memory does not grow with it), the parts are
// PUT PartsInFlight at once, each retried on its own, and the commit
// assembles them. Such an upload survives a crash or a cancel:
// ResumeUpload sends only the parts the bucket lacks, then commits;
// AbortUpload drops it. UploadFile.Progress reports the bytes sent. A server
// without a bucket answers presign with 404; the large file is then sent
// as multipart on its own, which a server with a raised cap accepts, and
// otherwise the error wraps ErrTooLarge. A 413 request_too_large carries
// the server's cap in "max": the client learns it and repacks.
//
// # Errors and retries
//
// Every 4xx/5xx answer is an *APIError (Status, Code, Message, Fields);
// branch on its Code (package wire names them all; ErrorCode reads it),
// never on its Message. IsNotFound, IsUnauthorized, IsUnavailable,
// IsQuotaExceeded and IsTooLarge classify them.
// A request that got no answer is a *TransportError. Calls that are safe
// to repeat are retried on connection errors, 503, 429, 502 and 504 with
// bounded exponential backoff and jitter (RetryPolicy), honouring
// Retry-After (while the server asks to come back, past MaxAttempts
// within RetryAfterBudget, 30 s by default: a database resuming from its
// pause is waited out) and the context: list, content, ack (idempotent by
// contract), presign, resume and abort (nothing is visible until commit),
// the presigned PUTs (same bytes, same key) and commit (a repeated commit
// answers the same files). A multipart upload is never retried: an answer
// lost after the server stored the files would make a second try stage
// them twice. Every call is bounded by its context and by nothing else;
// set a deadline.
//
// The token goes only to the API's host: the client follows content's 307
// to the bucket itself, without Authorization, and refuses a redirect
// from https to http. Errors never contain the token, and the query of a
// presigned URL (its signature) is cut from transport errors.
package client
