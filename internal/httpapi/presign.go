package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/sanitize"
)

const (
	msgPresignOff  = "presigned uploads are not enabled"
	msgNotReceived = "upload not received"
)

type presignRequest struct {
	Files []struct {
		Name     string `json:"name"`
		Size     int64  `json:"size"`
		MimeType string `json:"mimeType"`
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
// a client put large files straight into the bucket. Nothing is visible to
// the workspace until the JSON form of upload commits them.
func (a *API) presign(w http.ResponseWriter, r *http.Request) {
	ws, _, ok := a.guard(w, r)
	if !ok {
		return
	}
	if a.Presigner == nil || a.store.Blobs == nil {
		writeError(w, http.StatusNotFound, msgPresignOff)
		return
	}
	var req presignRequest
	if !a.decodeJSON(w, r, &req) || !fileCount(w, len(req.Files)) {
		return
	}
	items := make([]pendinguploads.Presigned, len(req.Files))
	for i, f := range req.Files {
		name := sanitize.Filename(f.Name)
		switch {
		case f.Size <= 0:
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "empty file", "filename": name})
			return
		case f.Size > a.store.FileCap():
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{
				"error": "file exceeds per-file cap", "filename": name, "size": f.Size, "max": a.store.FileCap()})
			return
		}
		items[i] = pendinguploads.Presigned{
			UploadID: a.newID(), WorkspaceID: ws, Filename: name,
			Mimetype: sanitize.Mimetype(f.MimeType), SizeBytes: f.Size,
		}
	}
	ctx := r.Context()
	if err := a.store.RecordPresigned(ctx, items); err != nil {
		a.storageFailure(w, r, "presign", err, "workspace_id", ws)
		return
	}
	out := make([]presignedUpload, len(items))
	expires := a.now().Add(PresignPutTTL).UTC().Truncate(time.Second)
	for i, it := range items {
		ctype := it.Mimetype
		if ctype == "" {
			ctype = sanitize.OctetStream
		}
		url, headers, err := a.Presigner.PresignPut(ctx, it.StagingKey(), it.SizeBytes, ctype, PresignPutTTL)
		if err != nil {
			a.storageFailure(w, r, "presign put", err, "workspace_id", ws)
			return
		}
		out[i] = presignedUpload{UploadID: it.UploadID.String(), Method: http.MethodPut, URL: url, Headers: headers, ExpiresAt: expires}
		a.logger().Info("presigned", "workspace_id", ws, "upload_id", it.UploadID, "size", it.SizeBytes, "filename", it.Filename)
	}
	writeJSON(w, http.StatusOK, map[string]any{"uploads": out})
}

type commitRequest struct {
	Files []struct {
		UploadID string `json:"upload_id"`
	} `json:"files"`
}

// commit is the JSON form of upload: it stages files that a client put
// into the bucket after presign. Each object must be there with exactly
// the declared size; otherwise 409 and nothing is stored.
func (a *API) commit(w http.ResponseWriter, r *http.Request, ws uuid.UUID) {
	if a.Presigner == nil || a.store.Blobs == nil {
		writeError(w, http.StatusBadRequest, msgPresignOff)
		return
	}
	var req commitRequest
	if !a.decodeJSON(w, r, &req) || !fileCount(w, len(req.Files)) {
		return
	}
	ids := make([]uuid.UUID, len(req.Files))
	seen := map[uuid.UUID]bool{}
	for i, f := range req.Files {
		id, err := uuid.Parse(f.UploadID)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid upload_id")
			return
		}
		if seen[id] {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "duplicate upload_id", "upload_id": id.String()})
			return
		}
		seen[id] = true
		ids[i] = id
	}
	ctx := r.Context()
	promised, err := a.store.LookupPresigned(ctx, ws, ids)
	if err != nil {
		a.storageFailure(w, r, "commit lookup", err, "workspace_id", ws)
		return
	}
	if a.replay(w, r, ws, ids, promised) {
		return
	}
	// Not a retry. Every upload must be new: a mix of new uploads and
	// uploads committed before is refused as a whole, naming the first
	// taken one, rather than half-committed (API.md's 200 for a retry
	// holds only when every upload_id was committed before).
	for _, id := range ids {
		p, ok := promised[id]
		if !ok {
			a.notReceived(w, r, ws, id, "unknown or expired")
			return
		}
		if p.Committed() {
			a.notReceived(w, r, ws, id, "already committed, beside new uploads")
			return
		}
	}
	items, err := a.placeStaged(ctx, ws, ids, promised)
	if err != nil {
		if nr, ok := errors.AsType[*notReceivedError](err); ok {
			// A concurrent commit of the same uploads may have taken the
			// staging objects away: then this is its retry.
			if !a.replay(w, r, ws, ids, nil) {
				a.notReceived(w, r, ws, nr.id, nr.why)
			}
			return
		}
		a.storageFailure(w, r, "commit place", err, "workspace_id", ws)
		return
	}
	if !a.stage(w, r, ws, items, ids) {
		return // the staging objects stay, so the client can retry the commit
	}
	// Committed: the copies under objects/ are the files now. The
	// lifecycle rule removes any staging object this misses.
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = promised[id].StagingKey()
	}
	_ = a.store.Blobs.Delete(ctx, keys)
}

// replay answers a commit whose every upload this workspace committed
// before (a client retrying a commit whose answer it lost) with the files
// that commit stored, and stores nothing; it reports whether it answered.
// With promised nil it looks the uploads up itself (after losing a race).
func (a *API) replay(w http.ResponseWriter, r *http.Request, ws uuid.UUID, ids []uuid.UUID, promised map[uuid.UUID]pendinguploads.Presigned) bool {
	ctx := r.Context()
	if promised == nil {
		var err error
		if promised, err = a.store.LookupPresigned(ctx, ws, ids); err != nil {
			a.storageFailure(w, r, "commit lookup", err, "workspace_id", ws)
			return true
		}
	}
	fileIDs := make([]uuid.UUID, len(ids))
	for i, id := range ids {
		p, ok := promised[id]
		if !ok || !p.Committed() {
			return false
		}
		fileIDs[i] = p.FileID
	}
	recs, err := a.store.CommittedFiles(ctx, ws, fileIDs)
	if err != nil {
		a.storageFailure(w, r, "commit replay", err, "workspace_id", ws)
		return true
	}
	out := make([]stagedFile, len(ids))
	for i, fid := range fileIDs {
		rec, ok := recs[fid]
		if !ok {
			return false // committed, then swept: not a retry any more
		}
		out[i] = stagedFile{
			FileID: rec.FileID.String(), URI: rec.URI(), Name: rec.Filename, MimeType: rec.Mimetype,
			Size: rec.SizeBytes, SHA256: hex.EncodeToString(rec.SHA256),
		}
	}
	a.logger().Info("commit replayed", "workspace_id", ws, "files", len(ids))
	writeJSON(w, http.StatusOK, map[string]any{"files": out})
	return true
}

// placeConcurrency bounds the objects one commit copies and hashes at once.
const placeConcurrency = 4

type notReceivedError struct {
	id  uuid.UUID
	why string
}

func (e *notReceivedError) Error() string {
	return fmt.Sprintf("upload %s not received: %s", e.id, e.why)
}

func (a *API) notReceived(w http.ResponseWriter, r *http.Request, ws, id uuid.UUID, why string) {
	a.refuse(r, "commit: "+why, ws, "upload_id", id)
	writeJSON(w, http.StatusConflict, map[string]any{"error": msgNotReceived, "upload_id": id.String()})
}

// placeStaged copies each staged object to a key only the server writes,
// objects/<workspace>/<new file ID>, and measures that copy: its size must
// be the declared one, and its SHA-256 is the digest the workspace will
// verify. What is hashed is exactly what will be served, whatever the
// client does with its presigned URL meanwhile. On failure the copies made
// so far are discarded; the staging objects stay for a retry.
func (a *API) placeStaged(ctx context.Context, ws uuid.UUID, ids []uuid.UUID, promised map[uuid.UUID]pendinguploads.Presigned) ([]pendinguploads.PutItem, error) {
	items := make([]pendinguploads.PutItem, len(ids))
	var mu sync.Mutex
	var placed []pendinguploads.Record
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(placeConcurrency)
	for i, id := range ids {
		p, fid := promised[id], uuid.New()
		dst := pendinguploads.ObjectKey(ws, fid)
		g.Go(func() error {
			err := a.store.Blobs.Copy(gctx, p.StagingKey(), dst)
			if errors.Is(err, pendinguploads.ErrBlobNotFound) {
				return &notReceivedError{id, "no object"}
			}
			if err != nil {
				return err
			}
			mu.Lock()
			placed = append(placed, pendinguploads.Record{S3Key: dst})
			mu.Unlock()
			n, sum, err := a.digest(gctx, dst)
			if err != nil {
				return err
			}
			if n != p.SizeBytes {
				return &notReceivedError{id, fmt.Sprintf("object holds %d bytes, %d declared", n, p.SizeBytes)}
			}
			items[i] = pendinguploads.PutItem{
				InBucket: true, FileID: fid, Size: n, SHA256: sum,
				Filename: p.Filename, Mimetype: p.Mimetype,
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		a.store.DiscardBlobs(ctx, placed)
		return nil, err
	}
	return items, nil
}

// digester hashes an object without holding it in memory; s3blobs.Store
// is one.
type digester interface {
	Digest(ctx context.Context, key string) (int64, []byte, error)
}

func (a *API) digest(ctx context.Context, key string) (int64, []byte, error) {
	if d, ok := a.store.Blobs.(digester); ok {
		return d.Digest(ctx, key)
	}
	data, err := a.store.Blobs.Get(ctx, key)
	if err != nil {
		return 0, nil, err
	}
	sum := sha256.Sum256(data)
	return int64(len(data)), sum[:], nil
}

// fileCount answers 400 itself unless a JSON request names 1 to MaxFiles
// files, with the messages of the multipart form.
func fileCount(w http.ResponseWriter, n int) bool {
	switch {
	case n == 0:
		writeError(w, http.StatusBadRequest, "no files field in request")
		return false
	case n > MaxFiles:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("too many files (limit %d)", MaxFiles))
		return false
	}
	return true
}

// decodeJSON reads a JSON body of exactly one value into v, answering
// 400/413 itself. The body is capped at MaxRequestBytes, as a multipart
// body is (a 64-file presign with long names is far above 64 KiB); anything
// after the value but white space is 400, found at its first byte, so a
// long trailer is refused without being read.
func (a *API) decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	limit := a.maxRequest()
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
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
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": "request body too large", "max": limit})
			return false
		}
		writeError(w, http.StatusBadRequest, "malformed JSON body")
		return false
	}
	return true
}

func (a *API) newID() uuid.UUID {
	if a.NewID != nil {
		return a.NewID()
	}
	return uuid.New()
}
