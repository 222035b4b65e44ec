package httpapi

import (
	"net/http"

	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// ack is POST /workspaces/{workspaceId}/pending-uploads/{fileId}/ack.
func (a *API) ack(w http.ResponseWriter, r *http.Request) error {
	ws, c, id, err := a.guardFile(r)
	if err != nil {
		return err
	}
	res, err := a.store.Ack(r.Context(), c, ws, id)
	if err != nil {
		return err
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
	return nil
}
