package httpapi

import "net/http"

// Limits is the answer of GET /uploads/limits: what a client needs before
// it uploads, from the same settings the handlers enforce.
type Limits struct {
	PerFileBytes             int64 `json:"per_file_bytes"`
	PerRequestBytes          int64 `json:"per_request_bytes"`
	MaxAttachmentsPerMessage int   `json:"max_attachments_per_message"`
	Presign                  bool  `json:"presign"`
	// Multipart: a presigned file above the threshold goes in parts of
	// part_bytes, for a client that asks (null: no bucket).
	MultipartThresholdBytes *int64 `json:"multipart_threshold_bytes"`
	MultipartPartBytes      *int64 `json:"multipart_part_bytes"`
	// The workspace quota on what waits (null: none).
	WorkspaceMaxPendingBytes *int64 `json:"workspace_max_pending_bytes"`
	WorkspaceMaxPendingFiles *int64 `json:"workspace_max_pending_files"`
}

// Limits returns the limits in force: the store's per-file cap
// (MAX_FILE_BYTES), the request cap (MAX_REQUEST_BYTES; larger files must
// take presign), the files per request, and whether presign is offered.
func (a *API) Limits() Limits {
	return Limits{
		PerFileBytes:             a.store.FileCap(),
		PerRequestBytes:          a.maxRequest(),
		MaxAttachmentsPerMessage: MaxFiles,
		Presign:                  a.PresignOffered || a.store.Presigns(),
		WorkspaceMaxPendingBytes: positive(a.store.MaxPendingBytes),
		MultipartThresholdBytes:  positive(a.multipart(a.store.MultipartThreshold)),
		MultipartPartBytes:       positive(a.multipart(a.store.PartBytes)),
		WorkspaceMaxPendingFiles: positive(a.store.MaxPendingFiles),
	}
}

// multipart is n where presigned uploads are offered, else 0.
func (a *API) multipart(n int64) int64 {
	if !a.PresignOffered && !a.store.Presigns() {
		return 0
	}
	return n
}

// positive is &n, or nil for 0 (off).
func positive(n int64) *int64 {
	if n <= 0 {
		return nil
	}
	return &n
}

// limits is GET /uploads/limits: public (no token), cacheable 5 minutes.
func (a *API) limits(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSONCached(w, http.StatusOK, a.Limits())
	return nil
}
