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
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// upload is POST /workspaces/{workspaceId}/chat/uploads: the files in a
// multipart form (form A), or the JSON commit of presigned uploads (form
// B; presign.go signs their PUTs).
func (a *API) upload(w http.ResponseWriter, r *http.Request) error {
	ws, id, err := a.pathIDs(r)
	if err != nil {
		return err
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == "application/json" {
		return a.commit(w, r, id, ws)
	}
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return errMalformedMultipart
	}
	limit := a.maxRequest()
	if r.ContentLength > limit {
		return errBodyTooLarge(limit)
	}
	files, err := a.readFiles(http.MaxBytesReader(w, r.Body, limit), params["boundary"], limit, r.ContentLength)
	if err != nil {
		return err
	}
	recs, err := a.store.Stage(r.Context(), id, ws, files)
	if err != nil {
		return err
	}
	a.staged(w, r, ws, recs)
	return nil
}

// commit is the JSON form of upload: it stages the files that clients
// put into the bucket after presign (pendinguploads.Store.Commit). A
// retried commit answers what the first stored. The store sets the
// commit's deadline, sized to the bytes it copies: only the outer bound
// (on Lambda, the invocation's) is passed down, not RequestTimeout.
func (a *API) commit(w http.ResponseWriter, r *http.Request, id *auth.Identity, ws uuid.UUID) error {
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
	recs, replayed, err := a.store.Commit(withoutRequestDeadline(r.Context()), id, ws, ids)
	if err != nil {
		return err
	}
	if replayed {
		a.logger().Info("commit replayed", append([]any{"workspace_id", ws, "files", len(recs)}, callerAttrs(r)...)...)
		writeJSON(w, http.StatusOK, wire.StagedAnswer{Files: stagedFiles(recs)})
		return nil
	}
	a.staged(w, r, ws, recs)
	return nil
}

// staged logs, counts and answers files newly staged, in request order.
func (a *API) staged(w http.ResponseWriter, r *http.Request, ws uuid.UUID, recs []pendinguploads.Record) {
	var total int64
	for _, rec := range recs {
		total += rec.SizeBytes
		a.logger().Info("staged", append([]any{"workspace_id", ws, "file_id", rec.FileID, "size", rec.SizeBytes,
			"filename", rec.Filename, "mimetype", rec.Mimetype, "in_bucket", rec.InBucket()}, callerAttrs(r)...)...)
	}
	a.Metrics.Count(metrics.Staged, nil, float64(len(recs)), nil)
	a.Metrics.Add(metrics.StagedBytes, metrics.UnitBytes, nil, float64(total), nil)
	writeJSON(w, http.StatusOK, wire.StagedAnswer{Files: stagedFiles(recs)})
}

func stagedFiles(recs []pendinguploads.Record) []wire.StagedFile {
	out := make([]wire.StagedFile, len(recs))
	for i, rec := range recs {
		out[i] = wire.StagedFile{
			FileID: rec.FileID, URI: rec.URI(), Name: rec.Filename, MimeType: rec.Mimetype,
			Size: rec.SizeBytes, SHA256: hex.EncodeToString(rec.SHA256),
		}
	}
	return out
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
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, a.maxRequest()))
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
			return errBodyTooLarge(a.maxRequest())
		}
		return errMalformedJSON
	}
	return nil
}
