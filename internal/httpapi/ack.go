package httpapi

import (
	"errors"
	"net/http"

	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// ack is POST /workspaces/{workspaceId}/pending-uploads/{fileId}/ack.
func (a *API) ack(w http.ResponseWriter, r *http.Request) {
	ws, p, ok := a.guard(w, r)
	if !ok {
		return
	}
	id, ok := fileID(w, r)
	if !ok {
		return
	}
	res, err := a.store.Ack(r.Context(), ws, id)
	switch {
	case errors.Is(err, pendinguploads.ErrNotFound):
		writeError(w, http.StatusNotFound, msgGone)
		return
	case errors.Is(err, pendinguploads.ErrWrongWorkspace):
		a.logger().Warn("refused", "reason", "file of another workspace", "op", "ack",
			"workspace_id", ws, "file_id", id, "token_prefix", p.TokenPrefix)
		writeError(w, http.StatusNotFound, msgNotYours)
		return
	case err != nil:
		a.storageFailure(w, r, "ack", err, "workspace_id", ws, "file_id", id)
		return
	}
	switch res {
	case pendinguploads.Acked:
		a.logger().Info("acked", "workspace_id", ws, "file_id", id)
		a.Metrics.Count(metrics.Acked, nil, 1, nil)
		writeJSON(w, http.StatusOK, map[string]any{"acked": true})
	case pendinguploads.Raced:
		a.logger().Info("acked", "workspace_id", ws, "file_id", id, "raced", true)
		writeJSON(w, http.StatusOK, map[string]any{"acked": true, "raced": true})
	default:
		a.logger().Info("acked again", "workspace_id", ws, "file_id", id)
		writeJSON(w, http.StatusOK, map[string]any{"acked": true})
	}
}
