package httpapi

import (
	"net/http"

	"github.com/google/uuid"
)

const msgPresignOff = "presigned uploads are not enabled"

// presign is POST /workspaces/{workspaceId}/chat/uploads/presign.
func (a *API) presign(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := a.guard(w, r); !ok {
		return
	}
	if a.Presigner == nil {
		writeError(w, http.StatusNotFound, msgPresignOff)
		return
	}
	writeError(w, http.StatusNotFound, msgPresignOff)
}

// commit is the JSON form of upload: files a client put into the bucket.
func (a *API) commit(w http.ResponseWriter, r *http.Request, ws uuid.UUID) {
	if a.Presigner == nil {
		writeError(w, http.StatusBadRequest, msgPresignOff)
		return
	}
	writeError(w, http.StatusBadRequest, msgPresignOff)
}
