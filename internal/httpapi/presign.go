package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/sanitize"
)

type presignRequest struct {
	Files []struct {
		Name     string `json:"name"`
		Size     int64  `json:"size"`
		MimeType string `json:"mimeType"`
		SHA256   string `json:"sha256"` // optional: hex
	} `json:"files"`
}

type presignedUpload struct {
	UploadID  string            `json:"upload_id"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	ExpiresAt time.Time         `json:"expires_at"`
}

// presign is POST /workspaces/{workspaceId}/chat/uploads/presign: it lets
// a client put large files straight into the bucket. Nothing is visible
// to the workspace until the JSON form of upload commits them. A file's
// declared sha256 (hex) is signed into its PUT.
func (a *API) presign(w http.ResponseWriter, r *http.Request) error {
	ws, id, err := a.guard(r)
	if err != nil {
		return err
	}
	if !a.store.Presigns() {
		return errPresignOff
	}
	var req presignRequest
	if err := a.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := fileCount(len(req.Files)); err != nil {
		return err
	}
	files := make([]pendinguploads.Declared, len(req.Files))
	for i, f := range req.Files {
		name := sanitize.Filename(f.Name)
		switch {
		case f.Size <= 0:
			return errEmptyFile(name)
		case f.Size > a.store.FileCap():
			return errFileTooLarge(name, f.Size, a.store.FileCap())
		}
		var sum []byte
		if f.SHA256 != "" {
			var err error
			if sum, err = hex.DecodeString(f.SHA256); err != nil || len(sum) != sha256.Size {
				return errBadSHA256(name)
			}
		}
		files[i] = pendinguploads.Declared{Filename: name, Mimetype: sanitize.Mimetype(f.MimeType), Size: f.Size, SHA256: sum}
	}
	puts, err := a.store.Presign(r.Context(), id, ws, files)
	if errors.Is(err, pendinguploads.ErrNoBucket) {
		return errPresignOff
	}
	if err != nil {
		return err
	}
	out := make([]presignedUpload, len(puts))
	for i, p := range puts {
		out[i] = presignedUpload{UploadID: p.UploadID.String(), Method: http.MethodPut, URL: p.URL, Headers: p.Headers, ExpiresAt: p.ExpiresAt}
		a.logger().Info("presigned", append([]any{"workspace_id", ws, "upload_id", p.UploadID, "size", files[i].Size,
			"filename", files[i].Filename}, id.LogAttrs()...)...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"uploads": out})
	return nil
}
