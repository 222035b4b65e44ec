package httpapi

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/sanitize"
)

// stagedFile is one file of the success body of upload.
type stagedFile struct {
	FileID   string `json:"file_id"`
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// upload is POST /workspaces/{workspaceId}/chat/uploads: multipart form A,
// or the JSON commit of presigned uploads (form B).
func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	ws, _, ok := a.guard(w, r)
	if !ok {
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == "application/json" {
		a.commit(w, r, ws)
		return
	}
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		writeError(w, http.StatusBadRequest, "malformed multipart body")
		return
	}
	limit := a.maxRequest()
	if r.ContentLength > limit {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": "request body too large", "max": limit})
		return
	}
	items, status, body := a.readFiles(http.MaxBytesReader(w, r.Body, limit), params["boundary"], limit, r.ContentLength)
	if status != 0 {
		var attrs []any
		for _, k := range []string{"filename", "size", "max"} {
			if v, ok := body[k]; ok {
				attrs = append(attrs, k, v)
			}
		}
		a.refuse(r, fmt.Sprint(body["error"]), ws, attrs...)
		writeJSON(w, status, body)
		return
	}
	a.stage(w, r, ws, items, nil)
}

// readFiles reads the parts named "files" that carry a file name, in
// order. On bad input it returns the status and JSON body to answer.
// With the body's length known (sizeHint > 0, already checked against
// limit), every file is read into one buffer of that size: the parts'
// bytes always fit in the body that carries them, so a request costs one
// allocation of its size, not a doubling buffer per file.
func (a *API) readFiles(body io.Reader, boundary string, limit, sizeHint int64) ([]pendinguploads.PutItem, int, map[string]any) {
	var arena []byte
	if sizeHint > 0 {
		arena = make([]byte, 0, sizeHint)
	}
	malformed := func(err error) (int, map[string]any) {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return http.StatusRequestEntityTooLarge, map[string]any{"error": "request body too large", "max": limit}
		}
		return http.StatusBadRequest, map[string]any{"error": "malformed multipart body"}
	}
	whole := newBodyCheck(body, boundary)
	mr := multipart.NewReader(whole, boundary)
	var items []pendinguploads.PutItem
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			// The multipart reader also answers io.EOF for a body cut
			// right after a boundary line: only the closing delimiter
			// ends it. The rest (an epilogue) must then read to its end,
			// as long as the declared length: a short body is cut too.
			if !whole.closed {
				return nil, http.StatusBadRequest, map[string]any{"error": "malformed multipart body"}
			}
			if _, err := io.Copy(io.Discard, whole); err != nil {
				s, b := malformed(err)
				return nil, s, b
			}
			if sizeHint > 0 && whole.n != sizeHint {
				return nil, http.StatusBadRequest, map[string]any{"error": "malformed multipart body"}
			}
			break
		}
		if err != nil {
			s, b := malformed(err)
			return nil, s, b
		}
		field, raw, isFile, err := partDisposition(part)
		if err != nil {
			// A part we cannot read the name of may be a file: skipping it
			// would store the request without it. Refuse the request.
			return nil, http.StatusBadRequest, map[string]any{"error": "malformed multipart body"}
		}
		if field != "files" || !isFile {
			// Other fields, and text values named files, do not count;
			// they still count towards the body cap.
			if _, err := io.Copy(io.Discard, part); err != nil {
				s, b := malformed(err)
				return nil, s, b
			}
			continue
		}
		if len(items) == MaxFiles {
			return nil, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("too many files (limit %d)", MaxFiles)}
		}
		name := sanitize.Filename(raw)
		var content []byte
		arena, content, err = readPart(arena, part, a.store.FileCap())
		if err != nil {
			s, b := malformed(err)
			return nil, s, b
		}
		n := int64(len(content))
		if n > a.store.FileCap() {
			rest, err := io.Copy(io.Discard, part)
			if err != nil {
				s, b := malformed(err)
				return nil, s, b
			}
			return nil, http.StatusRequestEntityTooLarge, map[string]any{
				"error": "file exceeds per-file cap", "filename": name, "size": n + rest, "max": a.store.FileCap()}
		}
		if n == 0 {
			return nil, http.StatusBadRequest, map[string]any{"error": "empty file", "filename": name}
		}
		items = append(items, pendinguploads.PutItem{
			Content:  content,
			Filename: name,
			Mimetype: sanitize.Mimetype(part.Header.Get("Content-Type")),
		})
	}
	if len(items) == 0 {
		return nil, http.StatusBadRequest, map[string]any{"error": "no files field in request"}
	}
	return items, 0, nil
}

// bodyCheck counts the bytes of a multipart body and notes whether its
// closing delimiter ("--boundary--" at the start of a line) went by. A
// file whose bytes hold "\n--boundary--" (a bare LF, not the CRLF before
// a delimiter) can make a cut body look closed; only a body crafted so
// is affected, and a body short of its Content-Length is caught anyway.
type bodyCheck struct {
	r      io.Reader
	n      int64
	pat    []byte // "\n--boundary--"
	tail   []byte // the last len(pat)-1 bytes read, to match across reads
	closed bool
}

func newBodyCheck(r io.Reader, boundary string) *bodyCheck {
	// The body's start counts as a line start.
	return &bodyCheck{r: r, pat: []byte("\n--" + boundary + "--"), tail: []byte("\n")}
}

func (b *bodyCheck) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if n > 0 && !b.closed {
		got := p[:n]
		// A match straddling the previous read, then one inside this one.
		seam := append(b.tail, got[:min(len(got), len(b.pat)-1)]...)
		b.closed = bytes.Contains(seam, b.pat) || bytes.Contains(got, b.pat)
		if k := len(b.pat) - 1; len(seam) > k {
			seam = seam[len(seam)-k:]
		}
		if len(got) >= len(b.pat)-1 {
			seam = got[len(got)-(len(b.pat)-1):]
		}
		b.tail = append(b.tail[:0:0], seam...)
	}
	return n, err
}

// readPart appends at most limit+1 bytes of r to arena and returns the
// arena and the bytes read, as a slice of it that later appends cannot
// overwrite. It grows the arena only when the hint was short (a chunked
// body); slices handed out earlier keep the old array alive.
func readPart(arena []byte, r io.Reader, limit int64) ([]byte, []byte, error) {
	start := len(arena)
	lr := io.LimitReader(r, limit+1)
	for {
		if len(arena) == cap(arena) {
			arena = slices.Grow(arena, max(32<<10, len(arena)-start))
		}
		n, err := lr.Read(arena[len(arena):cap(arena)])
		arena = arena[:len(arena)+n]
		if err == io.EOF {
			return arena, arena[start:len(arena):len(arena)], nil
		}
		if err != nil {
			return arena, nil, err
		}
	}
}

// partDisposition reads a part's Content-Disposition: its field name, its
// raw file name (decoded from filename* when given) and whether it is a
// file at all (a file input left empty still sends filename=""). A header
// that does not parse is an error. A filename* in a charset Go cannot
// decode leaves the part a file, named "" (sanitized later to "file").
func partDisposition(p *multipart.Part) (field, filename string, isFile bool, err error) {
	cd := p.Header.Get("Content-Disposition")
	_, params, err := mime.ParseMediaType(cd)
	if err != nil {
		return "", "", false, err
	}
	filename, isFile = params["filename"]
	if !isFile && strings.Contains(strings.ToLower(cd), "filename") {
		isFile = true
	}
	return params["name"], filename, isFile, nil
}

// stage writes the rows and their activity rows in one transaction and
// answers the success body, files in request order. It reports whether
// the rows committed.
func (a *API) stage(w http.ResponseWriter, r *http.Request, ws uuid.UUID, items []pendinguploads.PutItem, claim []uuid.UUID) bool {
	ctx := r.Context()
	recs, err := a.store.Stage(ctx, ws, items, claim)
	if ce, ok := errors.AsType[*pendinguploads.ClaimError](err); ok && len(claim) > 0 {
		// Another commit took an upload first. When it took them all,
		// this is the same commit twice: answer as its retry would be.
		if !a.replay(w, r, ws, claim, nil) {
			a.notReceived(w, r, ws, ce.UploadID, "taken by a concurrent commit")
		}
		return false
	}
	if err != nil {
		a.storageFailure(w, r, "stage", err, "workspace_id", ws, "files", len(items))
		return false
	}
	out := make([]stagedFile, len(recs))
	var total int64
	for i, rec := range recs {
		out[i] = stagedFile{
			FileID: rec.FileID.String(), URI: rec.URI(), Name: rec.Filename, MimeType: rec.Mimetype,
			Size: rec.SizeBytes, SHA256: hex.EncodeToString(rec.SHA256),
		}
		total += rec.SizeBytes
		a.logger().Info("staged", "workspace_id", ws, "file_id", rec.FileID, "size", rec.SizeBytes,
			"filename", rec.Filename, "mimetype", rec.Mimetype, "in_bucket", rec.S3Key != "")
	}
	a.Metrics.Count(metrics.Staged, nil, float64(len(recs)), nil)
	a.Metrics.Add(metrics.StagedBytes, metrics.UnitBytes, nil, float64(total), nil)
	writeJSON(w, http.StatusOK, map[string]any{"files": out})
	return true
}
