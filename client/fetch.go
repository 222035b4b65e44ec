package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Content is the answer of Fetch. Close Body when done.
type Content struct {
	Body io.ReadCloser
	// Size is the Content-Length, -1 when unknown.
	Size        int64
	ContentType string
	// Filename is the name from Content-Disposition ("" when absent). It
	// is the server's sanitized name; sanitize again before using it on
	// disk.
	Filename string
	// Digest is the whole file's SHA-256 as the answer declares it: its
	// Repr-Digest (RFC 9530), on a 200 or a 206; on a 200 without one (a
	// server before Repr-Digest), its Content-Digest, which is then the
	// whole file's too. A 206's Content-Digest is never read: RFC 9530
	// makes it the range's (a server before Repr-Digest sent the whole
	// file's). Nil when the answer has none (the bucket's, after a
	// redirect, has neither).
	Digest []byte
	// Redirected says the bytes came from the bucket, through a 307.
	Redirected bool
	// Offset is the offset in the file of Body's first byte: 0 for the
	// whole file (200), more for the rest of it (206, when asked for).
	// Total is then the whole file's size (Content-Range).
	Offset, Total int64
}

// Fetch opens the bytes of fileID. It asks for a redirect (redirect=1): a
// file held in the bucket then comes straight from S3, sparing the
// function the transfer. A 307 is followed to its Location
// without the Authorization header (the bucket's URL is presigned; the
// token must never reach it); an https API is never followed to plain
// http. Getting the answer is retried per Retry; reading Body is not:
// fetch again after a failed read. Fetch does not verify the bytes: use
// Download, or check Size and Digest yourself.
func (c *Client) Fetch(ctx context.Context, ws, fileID uuid.UUID) (*Content, error) {
	return c.fetch(ctx, ws, fileID, 0)
}

// fetch is Fetch from byte from on: from > 0 sends Range: bytes=<from>-
// (to the API and, after a redirect, to the bucket). A 206 must start at
// from and run to the end of the file (Content.Offset is then from); a
// 200 is the whole file (Offset 0): the server may ignore Range.
func (c *Client) fetch(ctx context.Context, ws, fileID uuid.UUID, from int64) (*Content, error) {
	op := "content " + fileID.String()
	api := c.endpoint(url.Values{"redirect": {"1"}}, "workspaces", ws.String(), "pending-uploads", fileID.String(), "content")
	var header map[string]string
	if from > 0 {
		header = map[string]string{"Range": fmt.Sprintf("bytes=%d-", from)}
	}
	resp, err := c.send(ctx, request{method: "GET", url: api, auth: true, retry: true, op: op, header: header})
	if err != nil {
		return nil, err
	}
	redirected := false
	if resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusFound ||
		resp.StatusCode == http.StatusSeeOther || resp.StatusCode == http.StatusPermanentRedirect {
		loc := resp.Header.Get("Location")
		resp.Body.Close()
		target, err := c.redirectTarget(api, loc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		resp, err = c.send(ctx, request{method: "GET", url: target, auth: false, retry: true, op: op + " (bucket)", header: header})
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK && (from == 0 || resp.StatusCode != http.StatusPartialContent) {
			resp.Body.Close()
			return nil, fmt.Errorf("%s: the bucket answered %s, want 200", op, resp.Status)
		}
		redirected = true
	} else if resp.StatusCode != http.StatusOK && (from == 0 || resp.StatusCode != http.StatusPartialContent) {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: unexpected status %s", op, resp.Status)
	}
	ct := &Content{Body: resp.Body, Size: resp.ContentLength, ContentType: resp.Header.Get("Content-Type"), Redirected: redirected}
	if resp.StatusCode == http.StatusPartialContent {
		start, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != from {
			resp.Body.Close()
			return nil, fmt.Errorf("%s: Content-Range %q does not answer Range: bytes=%d-", op, resp.Header.Get("Content-Range"), from)
		}
		ct.Offset, ct.Total = start, total
	}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		ct.Filename = params["filename"]
	}
	field, d := "Repr-Digest", resp.Header.Get("Repr-Digest")
	if d == "" && resp.StatusCode == http.StatusOK {
		field, d = "Content-Digest", resp.Header.Get("Content-Digest")
	}
	if d != "" {
		sum, err := parseDigest(field, d)
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		ct.Digest = sum
	}
	return ct, nil
}

// parseContentRange reads `bytes first-last/total` (RFC 9110 14.4): the
// first byte's offset and the whole file's size. The part must run to the
// end of the file: fetch asks only for such ranges.
func parseContentRange(v string) (first, total int64, err error) {
	spec, ok := strings.CutPrefix(v, "bytes ")
	rng, size, ok2 := strings.Cut(spec, "/")
	a, b, ok3 := strings.Cut(rng, "-")
	if !ok || !ok2 || !ok3 {
		return 0, 0, errors.New("malformed Content-Range")
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	total, err3 := strconv.ParseInt(size, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || last != total-1 {
		return 0, 0, errors.New("malformed Content-Range")
	}
	return first, total, nil
}

func (c *Client) redirectTarget(from, loc string) (string, error) {
	if loc == "" {
		return "", errors.New("redirect without Location")
	}
	base, _ := url.Parse(from)
	u, err := base.Parse(loc)
	if err != nil {
		return "", errors.New("redirect to an unparsable Location")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", fmt.Errorf("redirect to scheme %q refused", u.Scheme)
	}
	if base.Scheme == "https" && u.Scheme != "https" {
		return "", errors.New("redirect from https to http refused")
	}
	return u.String(), nil
}

// ParseContentDigest returns the SHA-256 of a Content-Digest or
// Repr-Digest header value (RFC 9530: a dictionary such as
// `sha-256=:<base64>:`, possibly listing other algorithms too). A header
// without sha-256 is an error: the client cannot check it.
func ParseContentDigest(v string) ([]byte, error) {
	return parseDigest("Content-Digest", v)
}

// parseDigest is ParseContentDigest of the value v of field, which its
// errors name.
func parseDigest(field, v string) ([]byte, error) {
	for _, item := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || strings.ToLower(strings.TrimSpace(k)) != "sha-256" {
			continue
		}
		val = strings.TrimSpace(val)
		if len(val) < 2 || val[0] != ':' || val[len(val)-1] != ':' {
			return nil, fmt.Errorf("%s: malformed sha-256 value", field)
		}
		sum, err := base64.StdEncoding.DecodeString(val[1 : len(val)-1])
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%s: malformed sha-256 value", field)
		}
		return sum, nil
	}
	return nil, fmt.Errorf("%s: no sha-256 value", field)
}

// Download fetches f into w and verifies it while it streams: exactly
// f.Size bytes, whose SHA-256 matches f.SHA256 (the list's) and the
// answer's digest of the whole file (Content.Digest: Repr-Digest, or an
// older server's Content-Digest on a 200), each where given. On a
// mismatch it returns an *IntegrityError (errors.Is ErrIntegrity) after
// the bytes went to w: write to a temporary place and discard it on any
// error. A row staged before the server kept digests (f.SHA256 "" and no
// digest header) is checked by size only.
func (c *Client) Download(ctx context.Context, ws uuid.UUID, f File, w io.Writer) (int64, error) {
	return c.Resume(ctx, ws, f, 0, sha256.New(), w, nil)
}

// Resume is Download of a file whose first have bytes (0 <= have <
// f.Size) are in w already and were written to h, a SHA-256
// (crypto/sha256.New): it asks only for the rest (Range: bytes=<have>-),
// appends it to w, and verifies the whole file, as Download does. When
// the server answers with the whole file instead (200: it may ignore
// Range), restart is called first: it must empty w, and h starts over;
// restart may be nil only when have is 0. It returns how many bytes it
// wrote to w. A resumed answer (206) is verified as the whole file too:
// its Repr-Digest is the whole file's. A have at or past f.Size is
// answered 416 (an *APIError).
func (c *Client) Resume(ctx context.Context, ws uuid.UUID, f File, have int64, h hash.Hash, w io.Writer, restart func() error) (int64, error) {
	var want []byte
	if f.SHA256 != "" {
		b, err := hex.DecodeString(f.SHA256)
		if err != nil || len(b) != sha256.Size {
			return 0, &IntegrityError{FileID: f.FileID.String(), What: "sha256", Want: "a hex SHA-256 in the list", Got: f.SHA256}
		}
		want = b
	}
	ct, err := c.fetch(ctx, ws, f.FileID, have)
	if err != nil {
		return 0, err
	}
	defer ct.Body.Close()
	id := f.FileID.String()
	if ct.Offset == 0 && have > 0 {
		if restart == nil {
			return 0, fmt.Errorf("content %s: the server sent the whole file, and there is no restart to empty w", id)
		}
		if err := restart(); err != nil {
			return 0, fmt.Errorf("content %s: restart: %w", id, err)
		}
		h.Reset()
	}
	if ct.Offset > 0 && ct.Total != f.Size {
		return 0, &IntegrityError{FileID: id, What: "size", Want: fmt.Sprint(f.Size), Got: fmt.Sprintf("%d (Content-Range)", ct.Total)}
	}
	rest := f.Size - ct.Offset
	if ct.Size >= 0 && ct.Size != rest {
		return 0, &IntegrityError{FileID: id, What: "size", Want: fmt.Sprint(rest), Got: fmt.Sprintf("%d (Content-Length)", ct.Size)}
	}
	if want != nil && ct.Digest != nil && !bytes.Equal(want, ct.Digest) {
		return 0, &IntegrityError{FileID: id, What: "repr-digest", Want: hex.EncodeToString(want), Got: hex.EncodeToString(ct.Digest)}
	}
	// Read one byte past the promised size, to see a body that is too long.
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(ct.Body, rest+1))
	if err != nil {
		return n, fmt.Errorf("content %s: read: %w", id, err)
	}
	if n != rest {
		return n, &IntegrityError{FileID: id, What: "size", Want: fmt.Sprint(f.Size), Got: fmt.Sprint(ct.Offset + n)}
	}
	return n, checkSum(id, h, want, ct.Digest)
}

func checkSum(id string, h hash.Hash, list, header []byte) error {
	got := h.Sum(nil)
	if list != nil && !bytes.Equal(got, list) {
		return &IntegrityError{FileID: id, What: "sha256", Want: hex.EncodeToString(list), Got: hex.EncodeToString(got)}
	}
	if header != nil && !bytes.Equal(got, header) {
		return &IntegrityError{FileID: id, What: "repr-digest", Want: hex.EncodeToString(header), Got: hex.EncodeToString(got)}
	}
	return nil
}
