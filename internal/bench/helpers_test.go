package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// sink is a ResponseWriter that keeps the status and counts the body:
// the handler's cost without a recorder's copy of the bytes.
type sink struct {
	h      http.Header
	status int
	n      int
	keep   *bytes.Buffer // non-nil: keep the body (small answers only)
}

func (s *sink) Header() http.Header {
	if s.h == nil {
		s.h = http.Header{}
	}
	return s.h
}
func (s *sink) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}
func (s *sink) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = 200
	}
	s.n += len(p)
	if s.keep != nil {
		s.keep.Write(p)
	}
	return len(p), nil
}

// serve calls h directly, as the Lambda adapter does (no TCP), and fails
// tb unless the answer is want.
func serve(tb testing.TB, h http.Handler, method, url, token, ctype string, body []byte, want int) *sink {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rd *bytes.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequestWithContext(ctx, method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	s := &sink{}
	// Keep the answer to read it (an upload's, an error's), not the bytes
	// of a GET: copying those would be the harness's cost, not the
	// handler's.
	if want != 200 || method != "GET" {
		s.keep = &bytes.Buffer{}
	}
	h.ServeHTTP(s, req)
	if s.status != want {
		msg := ""
		if s.keep != nil {
			msg = s.keep.String()
		}
		tb.Fatalf("%s %s: got %d %s, want %d", method, url, s.status, msg, want)
	}
	return s
}

type file struct {
	name    string
	content []byte
}

// multipartBody is a form-A upload of files.
func multipartBody(files ...file) ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files"; filename=%q`, f.name))
		h.Set("Content-Type", "application/octet-stream")
		pw, _ := mw.CreatePart(h)
		_, _ = pw.Write(f.content)
	}
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// payload is n pseudo-random (incompressible) bytes.
func payload(n int) []byte {
	b := make([]byte, n)
	x := uint64(0x9E3779B97F4A7C15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

func mustExec(tb testing.TB, srv *apptest.Server, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := srv.Pool.Exec(ctx, sql, args...); err != nil {
		tb.Fatalf("%.80s: %v", sql, err)
	}
}

// percentile returns the p-th percentile (0..100) of ds, sorted in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i]
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// stagedID is the file ID of the first file of an upload's answer.
func stagedID(tb testing.TB, s *sink) string {
	tb.Helper()
	var staged struct {
		Files []struct {
			FileID string `json:"file_id"`
		} `json:"files"`
	}
	if err := json.Unmarshal(s.keep.Bytes(), &staged); err != nil || len(staged.Files) == 0 {
		tb.Fatalf("upload answer %q: %v", s.keep.Bytes(), err)
	}
	return staged.Files[0].FileID
}
