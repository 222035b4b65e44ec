package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// Messages of API.md that more than one handler answers.
const (
	msgGone     = "pending upload not found, expired, or already acked"
	msgNotYours = "pending upload not found"
)

// storageFailure answers a storage error, the one table from error to
// status: a workspace the database does not know is 404; a dependency
// down or too slow is 503 and worth a retry; anything else is a bug, 500,
// and its text goes only to the log.
func (a *API) storageFailure(w http.ResponseWriter, r *http.Request, op string, err error, attrs ...any) {
	args := append([]any{"op", op, "err", err, "method", r.Method, "path", r.URL.Path}, attrs...)
	if errors.Is(err, pendinguploads.ErrUnknownWorkspace) {
		a.logger().Warn("refused", append([]any{"reason", "unknown workspace"}, args...)...)
		writeError(w, http.StatusNotFound, "workspace not found")
		return
	}
	if pendinguploads.IsUnavailable(err) {
		a.logger().Error("storage unavailable", args...)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "storage unavailable, retry shortly", "code": "unavailable"})
		return
	}
	a.logger().Error("storage error", args...)
	writeError(w, http.StatusInternalServerError, "storage error")
}

// fileFailure answers the failure of a call that names a file: gone
// (absent, expired, acked) is 404; another workspace's file is 404 too,
// never 403, and the attempt is logged; anything else is storageFailure.
func (a *API) fileFailure(w http.ResponseWriter, r *http.Request, op string, ws, id uuid.UUID, p auth.Principal, err error) {
	switch {
	case errors.Is(err, pendinguploads.ErrNotFound):
		writeError(w, http.StatusNotFound, msgGone)
	case errors.Is(err, pendinguploads.ErrWrongWorkspace):
		a.logger().Warn("refused", "reason", "file of another workspace", "op", op,
			"workspace_id", ws, "file_id", id, "token_prefix", p.TokenPrefix)
		writeError(w, http.StatusNotFound, msgNotYours)
	default:
		a.storageFailure(w, r, op, err, "workspace_id", ws, "file_id", id)
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": msg})
}

// writeJSON answers v as JSON. Encoding a map or struct of plain values
// cannot fail; if the client is gone, there is no one to tell.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSONCached(w, status, v)
}

// writeJSONCached is writeJSON keeping the Cache-Control the caller set.
func writeJSONCached(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Error("encode response", "err", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":"storage error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
