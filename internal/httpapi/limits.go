package httpapi

import (
	"net/http"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// LimitsOf is the answer of GET /uploads/limits for the configuration:
// the same settings the store and the handlers enforce, read from their
// one home. The function that serves it (list) has no bucket of its own:
// whether presign is offered is the configuration's CONTENT_BUCKET.
func LimitsOf(cfg config.Config) wire.Limits {
	l := wire.Limits{
		PerFileBytes:             cfg.MaxFileBytes,
		PerRequestBytes:          cfg.MaxRequestBytes,
		MaxAttachmentsPerMessage: limits.MaxFiles,
		Presign:                  cfg.ContentBucket != "",
		WorkspaceMaxPendingBytes: positive(cfg.WorkspaceMaxPendingBytes),
		WorkspaceMaxPendingFiles: positive(cfg.WorkspaceMaxPendingFiles),
		Push:                     PushOf(cfg),
	}
	if l.Presign {
		l.MultipartThresholdBytes = positive(cfg.MultipartThresholdBytes)
		l.MultipartPartBytes = positive(cfg.PartBytes)
	}
	return l
}

// positive is &n, or nil for 0 (off).
func positive(n int64) *int64 {
	if n <= 0 {
		return nil
	}
	return &n
}

// limits is GET /uploads/limits: public (no token), cacheable 5 minutes.
func (a *API) limits(w http.ResponseWriter, _ *http.Request, _ call) error {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSONCached(w, http.StatusOK, a.Limits)
	return nil
}
