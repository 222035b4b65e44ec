package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/sanitize"
)

// presign is POST /workspaces/{workspaceId}/chat/uploads/presign: it lets
// a client put large files straight into the bucket, in one PUT or, for a
// client that asks and a file above the multipart threshold, in parts.
// Nothing is visible to the workspace until the JSON form of upload
// commits them. Declared SHA-256s (the file's, each part's) are signed
// into the PUTs.
func (a *API) presign(w http.ResponseWriter, r *http.Request, c call) error {
	if !a.store.HasBucket() {
		return errPresignOff
	}
	var req wire.PresignRequest
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
		case f.Size > a.MaxFileBytes:
			return errFileTooLarge(name, f.Size, a.MaxFileBytes)
		}
		var sum []byte
		if f.SHA256 != "" {
			if sum = sha256Hex(f.SHA256); sum == nil {
				return errBadSHA256(name)
			}
		}
		var parts [][]byte
		for _, p := range f.Parts {
			part := sha256Hex(p.SHA256)
			if part == nil {
				return errBadSHA256(name)
			}
			parts = append(parts, part)
		}
		files[i] = pendinguploads.Declared{Filename: name, Mimetype: sanitize.Mimetype(f.MimeType), Size: f.Size, SHA256: sum,
			Multipart: f.Multipart, PartSHA256: parts}
	}
	puts, err := a.store.Presign(r.Context(), c.id, c.ws, files)
	if errors.Is(err, pendinguploads.ErrNoBucket) {
		return errPresignOff
	}
	if item, ok := errors.AsType[*pendinguploads.ItemError](err); ok && errors.Is(err, pendinguploads.ErrBadParts) {
		return errBadParts(files[item.Index].Filename)
	}
	if err != nil {
		return err
	}
	out := wire.PresignAnswer{Uploads: make([]wire.PresignedUpload, len(puts))}
	attrs := c.logAttrs()
	for i, p := range puts {
		out.Uploads[i] = presigned(p)
		a.logger().Info("presigned", append([]any{"workspace_id", c.ws, "upload_id", p.UploadID, "size", files[i].Size,
			"filename", files[i].Filename, "multipart", p.Multipart != nil}, attrs...)...)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// resume is POST /workspaces/{workspaceId}/chat/uploads/presign/{uploadId}:
// for a multipart upload not committed yet, the parts the bucket holds
// and fresh PUTs of the others.
func (a *API) resume(w http.ResponseWriter, r *http.Request, c call) error {
	upload, err := a.pathUploadID(r)
	if err != nil {
		return err
	}
	p, err := a.store.Resume(r.Context(), c.id, c.ws, upload)
	if errors.Is(err, pendinguploads.ErrUploadCommitted) {
		return errUploadCommitted(upload.String())
	}
	if err != nil {
		return err
	}
	a.logger().Info("resumed", append([]any{"workspace_id", c.ws, "upload_id", upload, "received", len(p.Multipart.Received),
		"missing", len(p.Multipart.Parts)}, c.logAttrs()...)...)
	writeJSON(w, http.StatusOK, presigned(p))
	return nil
}

// abort is DELETE /workspaces/{workspaceId}/chat/uploads/presign/{uploadId}:
// the upload is dropped, its parts or object with it.
func (a *API) abort(w http.ResponseWriter, r *http.Request, c call) error {
	upload, err := a.pathUploadID(r)
	if err != nil {
		return err
	}
	err = a.store.Abort(r.Context(), c.id, c.ws, upload)
	if errors.Is(err, pendinguploads.ErrUploadCommitted) {
		return errUploadCommitted(upload.String())
	}
	if err != nil {
		return err
	}
	a.logger().Info("aborted", append([]any{"workspace_id", c.ws, "upload_id", upload}, c.logAttrs()...)...)
	writeJSON(w, http.StatusOK, wire.AbortAnswer{Aborted: true})
	return nil
}

// pathUploadID is the {uploadId} of a route that names a presigned
// upload, once presigned uploads are offered.
func (a *API) pathUploadID(r *http.Request) (uuid.UUID, error) {
	if !a.store.HasBucket() {
		return uuid.Nil, errPresignOff
	}
	upload, err := uuid.Parse(r.PathValue("uploadId"))
	if err != nil {
		return uuid.Nil, errBadUploadID
	}
	return upload, nil
}

// presigned is the answer for one presigned upload.
func presigned(p pendinguploads.PresignedPut) wire.PresignedUpload {
	out := wire.PresignedUpload{UploadID: p.UploadID, ExpiresAt: p.ExpiresAt}
	if p.Multipart == nil {
		out.Method, out.URL, out.Headers = http.MethodPut, p.URL, p.Headers
		return out
	}
	m := &wire.PartPlan{PartBytes: p.Multipart.PartBytes, PartCount: p.Multipart.PartCount,
		Received: []wire.ReceivedPart{}, Parts: []wire.PresignedPart{}}
	for _, r := range p.Multipart.Received {
		m.Received = append(m.Received, wire.ReceivedPart{PartNumber: int(r.Number), Size: r.Size})
	}
	for _, pp := range p.Multipart.Parts {
		m.Parts = append(m.Parts, wire.PresignedPart{PartNumber: int(pp.Number), Size: pp.Size, Method: http.MethodPut, URL: pp.URL, Headers: pp.Headers})
	}
	out.Multipart = m
	return out
}

// sha256Hex decodes a hex SHA-256, or nil.
func sha256Hex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil
	}
	return b
}
