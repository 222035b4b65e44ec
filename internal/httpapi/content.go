package httpapi

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/sanitize"
)

// content is GET /workspaces/{workspaceId}/pending-uploads/{fileId}/content,
// for the caller front identified: the file's bytes (sendFile); with
// ?redirect=1, a bucket-held file's clients go to S3.
func (a *API) content(w http.ResponseWriter, r *http.Request, c call) error {
	file, err := pathFileID(r)
	if err != nil {
		return err
	}
	redirect, err := contentQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	return a.sendFile(w, r, c, "body", redirect, func(ctx context.Context, want pendinguploads.Want) (pendinguploads.Fetched, error) {
		return a.store.Fetch(ctx, c.id, c.ws, file, want)
	})
}

// fetchFunc looks a file up for serving and stamps its fetched_at when
// the answer will send what want asks (pendinguploads.Store.Fetch, for
// the caller's check the route made).
type fetchFunc func(ctx context.Context, want pendinguploads.Want) (pendinguploads.Fetched, error)

// sendFile answers a GET of one file that fetch looks up: 200 with its
// bytes, streamed a chunk at a time; one Range gives 206; with redirect,
// a bucket-held file is a redirect to S3. The status line is written
// only once the bytes are known to be there, and an answer that fails
// after it is aborted, never finished short: the bytes sent always match
// the headers. via names the door in the fetched log line ("body", or a
// download link's "link").
func (a *API) sendFile(w http.ResponseWriter, r *http.Request, c call, via string, redirect bool, fetch fetchFunc) error {
	ctx := r.Context()
	rng := parseRange(r.Header.Get("Range"))
	ifRange := r.Header.Get("If-Range")
	want := pendinguploads.Want{From: rng.from(), Redirect: redirect}
	if rng.set && ifRange != "" {
		// RFC 9110 13.1.5: a Range is for the version If-Range names; for
		// any other (a date, another tag, a file without a digest), the
		// whole file. Decided before the look-up, which stamps fetched_at
		// when the answer sends bytes: a tag that can be no file's (a
		// date: we send no Last-Modified) drops the range here, one of
		// our form makes it hold only for the file it names.
		if digest, ok := parseETag(ifRange); ok {
			want.IfDigest = digest
		} else {
			rng, want.From = byteRange{}, 0
		}
	}
	rec, err := fetch(ctx, want)
	if errors.Is(err, pendinguploads.ErrNotFound) {
		return errExpired
	}
	if err != nil {
		return err
	}
	ctype := rec.Mimetype
	if ctype == "" {
		ctype = sanitize.OctetStream
	}
	disposition := sanitize.ContentDisposition(rec.Filename)

	if redirect {
		if sent, err := a.redirectToBucket(w, r, c, rec, disposition, ctype); sent || err != nil {
			return err
		}
	}

	if want.IfDigest != nil && etag(rec.Record) != ifRange {
		rng = byteRange{} // another version: the whole file, as Fetch stamped it
	}
	off, n, status := rng.resolve(rec.SizeBytes)
	if status == http.StatusRequestedRangeNotSatisfiable {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", rec.SizeBytes))
		return errBadRange
	}
	// Opening the bytes is a dependency call, bound by the request's
	// deadline like any other; sending them is not (100 MiB at a client's
	// pace takes longer than RequestDeadline): the stream runs on the
	// request's context without that deadline, bound by the invocation's
	// (Lambda) or the server's write timeout (dev server).
	sctx, scancel := context.WithCancel(withoutRequestDeadline(ctx))
	defer scancel()
	body, err := a.openWithin(ctx, sctx, scancel, rec, off, n)
	if err != nil {
		return err
	}
	defer body.Close()
	setContentHeaders(w.Header(), rec.Record, ctype, disposition, status, off, n)
	w.WriteHeader(status)
	if sent, err := copyBody(w, body, n, scancel); err != nil || sent != n {
		// The status line is gone: abort the answer, so that the client
		// sees a broken transfer rather than a short file.
		a.logger().Error("content aborted", "workspace_id", rec.WorkspaceID, "file_id", rec.FileID, "size", rec.SizeBytes,
			"filename", rec.Filename, "sent", sent, "want", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	a.fetched(c, rec.Record, via, n)
	return nil
}

// copyBody writes body's n bytes to w. While the bytes flow, a read from
// Postgres or S3 that makes no progress for StreamIdleTimeout calls
// scancel, which ends the stream (a dependency frozen mid-stream): the
// answer is aborted, and the connection freed. Bytes already in memory
// (an inline file that came with its row) are written in one call, with
// no copy buffer and nothing to watch.
func copyBody(w io.Writer, body pendinguploads.Body, n int64, scancel context.CancelFunc) (int64, error) {
	if body.InMemory {
		return io.Copy(w, body)
	}
	idle := time.AfterFunc(StreamIdleTimeout, scancel)
	defer idle.Stop()
	return io.CopyBuffer(w, &idleReader{Reader: body, timer: idle}, make([]byte, min(n, 256<<10)))
}

// redirectToBucket answers a ?redirect=1 fetch of rec with a redirect to
// a signed GET of its object, and reports whether it did (false: the
// file is not in the bucket, and its bytes are sent instead).
func (a *API) redirectToBucket(w http.ResponseWriter, r *http.Request, c call, rec pendinguploads.Fetched, disposition, ctype string) (bool, error) {
	url, ok, err := a.store.SignGet(r.Context(), rec, disposition, ctype)
	if err != nil || !ok {
		return false, err
	}
	a.fetched(c, rec.Record, "redirect", rec.SizeBytes)
	h := w.Header()
	h.Set("Location", url)
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTemporaryRedirect)
	return true, nil
}

// openWithin opens n bytes of rec from off on sctx (the stream's
// context, which scancel cancels), within ctx's deadline (the
// request's): opening is a dependency call, and one that passes the
// deadline cancels sctx and is a 503. A file swept since the look-up is
// errExpired: nothing was answered yet.
func (a *API) openWithin(ctx, sctx context.Context, scancel context.CancelFunc, rec pendinguploads.Fetched, off, n int64) (pendinguploads.Body, error) {
	stop := context.AfterFunc(ctx, scancel)
	body, err := a.store.Open(sctx, rec, off, n)
	if !stop() {
		if err == nil {
			body.Close()
		}
		err = fmt.Errorf("open after the request's deadline: %w (%v)", context.DeadlineExceeded, err)
	}
	if errors.Is(err, pendinguploads.ErrNotFound) {
		return pendinguploads.Body{}, errExpired
	}
	if err != nil {
		return pendinguploads.Body{}, fmt.Errorf("open: %w", err)
	}
	return body, nil
}

// setContentHeaders sets the headers of an answer of n bytes of rec
// from off, with status (200 or 206).
func setContentHeaders(h http.Header, rec pendinguploads.Record, ctype, disposition string, status int, off, n int64) {
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	h.Set("Content-Disposition", disposition)
	if len(rec.SHA256) > 0 {
		// RFC 9530: Repr-Digest is the whole file's, on a 200 and a 206
		// alike (what a resumed download verifies); Content-Digest is over
		// the bytes of this message, the whole file on a 200. A 206 has
		// none: its range's digest is known only once its bytes are read,
		// after the headers, and clients before Repr-Digest took a 206's
		// Content-Digest for the whole file's.
		h.Set("Repr-Digest", sanitize.Digest(rec.SHA256))
		if status == http.StatusOK {
			h.Set("Content-Digest", sanitize.Digest(rec.SHA256))
		}
		// A strong validator: a browser's download manager resumes a cut
		// download (Range with If-Range) only when the answer had one.
		h.Set("ETag", etag(rec))
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Accept-Ranges", "bytes")
	if status == http.StatusPartialContent {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, rec.SizeBytes))
	}
}

// etag is rec's strong entity tag: its SHA-256 in hex, quoted (a file's
// bytes never change); "" for a row staged without a digest.
func etag(rec pendinguploads.Record) string {
	if len(rec.SHA256) == 0 {
		return ""
	}
	return `"` + hex.EncodeToString(rec.SHA256) + `"`
}

// parseETag returns the SHA-256 that tag names when it is an entity tag
// as etag writes them (quoted lower-case hex of 32 bytes), so that
// etag(rec) == tag exactly when rec's SHA-256 is it.
func parseETag(tag string) ([]byte, bool) {
	if len(tag) != 66 || tag[0] != '"' || tag[65] != '"' {
		return nil, false
	}
	digest, err := hex.DecodeString(tag[1:65])
	if err != nil || hex.EncodeToString(digest) != tag[1:65] {
		return nil, false
	}
	return digest, true
}

// StreamIdleTimeout bounds one read of a streamed file's bytes from
// Postgres or S3 (not the whole transfer, which goes at the client's pace).
const StreamIdleTimeout = 15 * time.Second

// idleReader arms timer for the length of each Read.
type idleReader struct {
	io.Reader
	timer *time.Timer
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.timer.Reset(StreamIdleTimeout)
	n, err := r.Reader.Read(p)
	r.timer.Stop()
	return n, err
}

// contentQuery reads content's query string: empty, or exactly
// redirect=1, the only query that may redirect. Any other parameter or
// value, a repeat, or a query that does not parse, is 400.
func contentQuery(raw string) (redirect bool, err error) {
	q, err := parseQuery(raw)
	if err != nil || len(q) == 0 {
		return false, err
	}
	if v := q["redirect"]; len(q) != 1 || len(v) != 1 || v[0] != "1" {
		return false, errBadContentParam
	}
	return true, nil
}

// byteRange is a Range header as the content route reads it: one range
// of bytes (first-last, first-, or -suffix), or none. Anything else (no
// header, another unit, several ranges, a header that does not parse) is
// none, the whole file: RFC 9110 lets a server ignore Range, and a client
// asking for several ranges gets them all.
type byteRange struct {
	set         bool
	first, last int64 // last -1: to the end
	suffix      int64 // -1: not a suffix range
}

func parseRange(header string) byteRange {
	none := byteRange{}
	unit, spec, ok := strings.Cut(strings.TrimSpace(header), "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") || strings.Contains(spec, ",") {
		return none
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return none
	}
	num := func(s string) (int64, bool) {
		if s == "" || strings.TrimLeft(s, "0123456789") != "" {
			return 0, false
		}
		v, err := strconv.ParseInt(s, 10, 64)
		return v, err == nil
	}
	if first == "" {
		suffix, ok := num(last)
		if !ok {
			return none
		}
		return byteRange{set: true, suffix: suffix}
	}
	start, ok := num(first)
	if !ok {
		return none
	}
	end := int64(-1)
	if last != "" {
		if end, ok = num(last); !ok || end < start {
			return none
		}
	}
	return byteRange{set: true, first: start, last: end, suffix: -1}
}

// from is the first byte the range needs: a file must be longer for the
// range to be satisfiable (0: any file will do; math.MaxInt64: none).
func (b byteRange) from() int64 {
	switch {
	case !b.set:
		return 0
	case b.suffix == 0:
		return math.MaxInt64
	case b.suffix > 0:
		return 0
	}
	return b.first
}

// resolve is the range against a file of size bytes: the offset and
// length to send, and the status to answer: 200 for the whole file, 206
// for one range, 416 when no byte of it is in the file.
func (b byteRange) resolve(size int64) (off, n int64, status int) {
	switch {
	case !b.set:
		return 0, size, http.StatusOK
	case size <= b.from():
		return 0, 0, http.StatusRequestedRangeNotSatisfiable
	case b.suffix > 0:
		suffix := min(b.suffix, size)
		return size - suffix, suffix, http.StatusPartialContent
	}
	end := size - 1
	if b.last >= 0 {
		end = min(b.last, size-1)
	}
	return b.first, end - b.first + 1, http.StatusPartialContent
}

// fetched logs and counts a fetch (fetched_at is stamped by Fetch).
func (a *API) fetched(c call, rec pendinguploads.Record, via string, sent int64) {
	a.logger().Info("fetched", append([]any{"via", via, "workspace_id", rec.WorkspaceID, "file_id", rec.FileID,
		"size", rec.SizeBytes, "sent", sent, "filename", rec.Filename}, c.logAttrs()...)...)
	a.Metrics.Count(metrics.Fetched, nil, 1, nil)
}
