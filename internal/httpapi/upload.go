package httpapi

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// upload is POST /workspaces/{workspaceId}/chat/uploads: the files in a
// multipart form (form A), or the JSON commit of presigned uploads (form
// B; presign.go signs their PUTs).
func (a *API) upload(w http.ResponseWriter, r *http.Request, c call) error {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == "application/json" {
		return a.commit(w, r, c)
	}
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return errMalformedMultipart
	}
	limit := a.MaxRequestBytes
	if r.ContentLength > limit {
		return errFilesTooLarge(limit, a.store.HasBucket())
	}
	files, err := readFiles(http.MaxBytesReader(w, r.Body, limit), params["boundary"], limit, r.ContentLength, a.MaxFileBytes)
	if e, ok := errors.AsType[*Error](err); ok && e.Code == wire.CodeRequestTooLarge {
		return errFilesTooLarge(limit, a.store.HasBucket())
	}
	if err != nil {
		return err
	}
	recs, err := a.store.Stage(r.Context(), c.id, c.ws, files)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.staged(c, recs, false))
	return nil
}

// commit is the JSON form of upload: it stages the files that clients
// put into the bucket after presign (pendinguploads.Store.Commit). A
// retried commit answers what the first stored. The store sets the
// commit's deadline, sized to the bytes it copies: only the outer bound
// (on Lambda, the invocation's) is passed down, not RequestTimeout.
func (a *API) commit(w http.ResponseWriter, r *http.Request, c call) error {
	if !a.store.HasBucket() {
		return errCommitPresignOff
	}
	var req wire.CommitRequest
	if err := a.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := fileCount(len(req.Files)); err != nil {
		return err
	}
	ids := make([]uuid.UUID, len(req.Files))
	seen := map[uuid.UUID]bool{}
	for i, f := range req.Files {
		u, err := uuid.Parse(f.UploadID)
		if err != nil {
			return errBadUploadID
		}
		if seen[u] {
			return errDuplicateUploadID(u.String())
		}
		seen[u] = true
		ids[i] = u
	}
	recs, replayed, err := a.store.Commit(withoutRequestDeadline(r.Context()), c.id, c.ws, ids)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.staged(c, recs, replayed))
	return nil
}

// staged is the answer naming recs, files staged (or, replayed, a
// retried commit's files, staged before), in request order. Files newly
// staged are logged one line each, and counted; a replayed commit is
// logged once.
func (a *API) staged(c call, recs []pendinguploads.Record, replayed bool) wire.StagedAnswer {
	log, attrs := a.logger(), c.logAttrs()
	if replayed {
		log.Info("commit replayed", append([]any{"workspace_id", c.ws, "files", len(recs)}, attrs...)...)
	}
	files := make([]wire.StagedFile, len(recs))
	var total int64
	for i, rec := range recs {
		files[i] = wire.StagedFile{
			FileID: rec.FileID, URI: rec.URI(), Name: rec.Filename, MimeType: rec.Mimetype,
			Size: rec.SizeBytes, SHA256: hex.EncodeToString(rec.SHA256),
		}
		total += rec.SizeBytes
		if !replayed {
			log.Info("staged", append([]any{"workspace_id", c.ws, "file_id", rec.FileID, "size", rec.SizeBytes,
				"filename", rec.Filename, "mimetype", rec.Mimetype, "in_bucket", rec.InBucket()}, attrs...)...)
		}
	}
	if !replayed {
		a.Metrics.Count(metrics.Staged, nil, float64(len(recs)), nil)
		a.Metrics.Add(metrics.StagedBytes, metrics.UnitBytes, nil, float64(total), nil)
	}
	return wire.StagedAnswer{Files: files}
}

// fileCount refuses a JSON request that does not name 1 to limits.MaxFiles
// files, with the messages of the multipart form.
func fileCount(n int) error {
	switch {
	case n == 0:
		return errNoFiles
	case n > limits.MaxFiles:
		return errTooManyFiles
	}
	return nil
}

// decodeJSON reads a JSON body of exactly one value into v. The body is
// capped at MaxRequestBytes, as a multipart body is (a 64-file presign
// with long names is far above 64 KiB); anything after the value but
// white space is 400, found at its first byte, so a long trailer is
// refused without being read.
func (a *API) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, a.MaxRequestBytes))
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = terr
			if err == nil {
				err = errors.New("data after the JSON value")
			}
		}
	}
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return errBodyTooLarge(a.MaxRequestBytes)
		}
		return errMalformedJSON
	}
	return nil
}
