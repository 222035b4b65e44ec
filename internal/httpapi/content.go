package httpapi

import (
	"net/http"
	"strconv"

	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/sanitize"
)

// content is GET /workspaces/{workspaceId}/pending-uploads/{fileId}/content.
func (a *API) content(w http.ResponseWriter, r *http.Request) {
	ws, p, ok := a.guard(w, r)
	if !ok {
		return
	}
	id, ok := fileID(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	rec, stamped, err := a.store.Fetch(ctx, ws, id)
	if err != nil {
		a.fileFailure(w, r, "content", ws, id, p, err)
		return
	}
	ctype := rec.Mimetype
	if ctype == "" {
		ctype = sanitize.OctetStream
	}
	disposition := sanitize.ContentDisposition(rec.Filename)

	if rec.S3Key != "" && rec.SizeBytes > a.maxResponse() && a.Presigner != nil {
		url, err := a.Presigner.PresignGet(ctx, rec.S3Key, disposition, ctype, PresignGetTTL)
		if err != nil {
			a.storageFailure(w, r, "presign get", err, "workspace_id", ws, "file_id", id)
			return
		}
		a.markFetched(r, rec, "redirect")
		h := w.Header()
		h.Set("Location", url)
		h.Set("Cache-Control", "private, no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}

	data, err := a.store.Open(ctx, rec)
	if err != nil {
		a.storageFailure(w, r, "open", err, "workspace_id", ws, "file_id", id)
		return
	}
	if stamped {
		a.fetched(rec, "body")
	} else {
		a.markFetched(r, rec, "body")
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Content-Disposition", disposition)
	if len(rec.SHA256) > 0 {
		h.Set("Content-Digest", sanitize.ContentDigest(rec.SHA256))
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// markFetched stamps fetched_at; a failure is logged, not answered: the
// bytes are good either way.
func (a *API) markFetched(r *http.Request, rec pendinguploads.Record, via string) {
	if err := a.store.MarkFetched(r.Context(), rec.WorkspaceID, rec.FileID); err != nil {
		a.logger().Warn("fetched_at not stamped", "workspace_id", rec.WorkspaceID, "file_id", rec.FileID, "err", err)
	}
	a.fetched(rec, via)
}

// fetched logs and counts a fetch whose fetched_at is stamped.
func (a *API) fetched(rec pendinguploads.Record, via string) {
	a.logger().Info("fetched", "via", via, "workspace_id", rec.WorkspaceID, "file_id", rec.FileID,
		"size", rec.SizeBytes, "filename", rec.Filename)
	a.Metrics.Count(metrics.Fetched, nil, 1, nil)
}
