package httpapi

import (
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// scan answers each file's malware scan state (GET …/chat/uploads/scan,
// file_id once per file, 1 to limits.MaxFiles), for the sender: the same
// caller the upload route serves. A file the workspace does not have is
// not_found, whoever else has it.
func (a *API) scan(w http.ResponseWriter, r *http.Request, c call) error {
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	raw := q["file_id"]
	if len(raw) == 0 || len(raw) > limits.MaxFiles {
		return errBadFileID // none, or more than a request stages
	}
	ids := make([]uuid.UUID, len(raw))
	for i, s := range raw {
		if ids[i], err = uuid.Parse(s); err != nil || len(s) != 36 {
			return errBadFileID
		}
	}
	states, err := a.store.ScanStates(r.Context(), c.id, c.ws, ids)
	if err != nil {
		return err
	}
	out := wire.ScanAnswer{Files: make([]wire.FileScan, len(ids))}
	for i, id := range ids {
		f := wire.FileScan{FileID: id, State: wire.ScanNotFound}
		if s, ok := states[id]; ok {
			f.State = string(s.State)
			if s.Result != "" && s.Result != "NO_THREATS_FOUND" {
				f.Reason = strings.ToLower(s.Result)
			}
		}
		out.Files[i] = f
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
