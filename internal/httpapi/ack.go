package httpapi

import (
	"net/http"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// ack is POST /workspaces/{workspaceId}/pending-uploads/{fileId}/ack.
func (a *API) ack(w http.ResponseWriter, r *http.Request, c call) error {
	file, err := pathFileID(r)
	if err != nil {
		return err
	}
	res, err := a.store.Ack(r.Context(), c.id, c.ws, file)
	if err != nil {
		return err
	}
	args := append([]any{"workspace_id", c.ws, "file_id", file}, c.logAttrs()...)
	switch res {
	case pendinguploads.Acked:
		a.logger().Info("acked", args...)
		a.Metrics.Count(metrics.Acked, nil, 1, nil)
		writeJSON(w, http.StatusOK, wire.AckAnswer{Acked: true})
	case pendinguploads.SweptMeanwhile:
		a.logger().Info("acked", append(args, "raced", true)...)
		writeJSON(w, http.StatusOK, wire.AckAnswer{Acked: true, Raced: true})
	default:
		a.logger().Info("acked again", args...)
		writeJSON(w, http.StatusOK, wire.AckAnswer{Acked: true})
	}
	return nil
}
