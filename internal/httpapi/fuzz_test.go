package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// FuzzUploadHandler feeds arbitrary bodies and Content-Types to the upload
// handler, authenticated with the admin token: no input yields a 5xx or a
// panic, and every answer is JSON (an error body, or the staged files).
// The handler is called directly, not through a server, so that a panic
// reaches the fuzzer instead of net/http's recovery. One service (one
// database) serves every input of a fuzz worker; a small request cap keeps
// the 413 paths within the fuzzer's reach.
func FuzzUploadHandler(f *testing.F) {
	srv := apptest.NewServer(f, apptest.Options{Env: map[string]string{"MAX_REQUEST_BYTES": "65536"}})
	h := srv.App.API.Mux()
	url := "/workspaces/" + uuid.NewString() + "/chat/uploads"

	const b = "XyZ"
	part := func(headers, body string) string {
		return "--" + b + "\r\n" + headers + "\r\n\r\n" + body + "\r\n"
	}
	mp := "multipart/form-data; boundary=" + b
	f.Add(mp, []byte(part(`Content-Disposition: form-data; name="files"; filename="a.txt"`+"\r\nContent-Type: text/plain", "hello")+"--"+b+"--\r\n"))
	f.Add(mp, []byte(part(`Content-Disposition: form-data; name="files"; filename="../x y.pdf"`, "1")+
		part(`Content-Disposition: form-data; name="files"; filename*=UTF-8''%E4%B8%AD.docx`, "2")+"--"+b+"--\r\n"))
	f.Add(mp, []byte(part(`Content-Disposition: form-data; name="files"; filename="empty"`, "")+"--"+b+"--\r\n"))
	f.Add(mp, []byte(part(`Content-Disposition: form-data; name="files"`, "a text value")+"--"+b+"--\r\n"))
	f.Add(mp, []byte(part(`Content-Disposition: form-data; name="other"; filename="a"`, "x")+"--"+b+"--\r\n"))
	f.Add(mp, []byte("--"+b+"\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a\"\r\n\r\nunterminated"))
	f.Add(mp, []byte(part(`Content-Disposition: form-data; name="files"; filename="big"`, strings.Repeat("z", 70000))+"--"+b+"--\r\n"))
	f.Add(mp, []byte(part("Content-Disposition: form-data; name=\"files\"; filename=\"c\"\r\nContent-Type: text/html; charset=\x00", "x")+"--"+b+"--\r\n"))
	f.Add("multipart/form-data", []byte("--"+b+"--\r\n"))
	f.Add("multipart/form-data; boundary=\"\"", []byte(""))
	f.Add("text/plain", []byte("hello"))
	f.Add("", []byte{})
	f.Add("application/json", []byte(`{"files":[{"upload_id":"`+uuid.NewString()+`"}]}`))
	f.Add("application/json", []byte(`{"files":`))

	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("Content-Type %q: got %d %s, want no 5xx", ctype, rec.Code, rec.Body.Bytes())
		}
		var out struct {
			Error *string           `json:"error"`
			Files []json.RawMessage `json:"files"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("got %d with a body that is not JSON (%v): %q", rec.Code, err, rec.Body.Bytes())
		}
		switch {
		case rec.Code == http.StatusOK && (out.Error != nil || len(out.Files) == 0):
			t.Fatalf("200 without files: %s", rec.Body.Bytes())
		case rec.Code != http.StatusOK && (out.Error == nil || *out.Error == ""):
			t.Fatalf("%d without an error message: %s", rec.Code, rec.Body.Bytes())
		}
	})
}
