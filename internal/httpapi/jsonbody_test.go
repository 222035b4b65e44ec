package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestJSONBodies: the JSON bodies of presign and commit are one JSON value
// and at most MAX_REQUEST_BYTES: anything after the value (even 10 MB of
// it) is 400 malformed JSON body, a body over the cap is 413 naming the
// cap, and a valid 64-file presign far above 64 KiB passes. Over the
// fake (with a bucket): reading the body is HTTP's own.
func TestJSONBodies(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeOptions{Bucket: true})
	ws := uuid.New()
	const one = `{"files":[{"name":"a.bin","size":10}]}`
	commitOne := `{"files":[{"upload_id":"` + uuid.NewString() + `"}]}`
	tenMB := strings.Repeat("x", 10<<20)
	for _, route := range []struct{ name, url, body string }{
		{"Presign", presignURL(srv, ws.String()), one},
		{"Commit", uploadsURL(srv, ws.String()), commitOne},
	} {
		for name, trailer := range map[string]string{
			"Garbage":       "x",
			"SecondValue":   "{}",
			"SecondValueWS": "\n {}",
			"Number":        " 1",
			"TenMB":         " " + tenMB,
		} {
			t.Run(route.name+"/"+name, func(t *testing.T) {
				res := post(t, route.url, srv.AdminToken, "application/json", []byte(route.body+trailer))
				wantError(t, res, http.StatusBadRequest, "malformed JSON body", nil)
			})
		}
		t.Run(route.name+"/OverCap", func(t *testing.T) {
			body := `{"files":[{"name":"` + strings.Repeat("n", 5<<20) + `","size":10}]}`
			res := post(t, route.url, srv.AdminToken, "application/json", []byte(body))
			wantError(t, res, http.StatusRequestEntityTooLarge, "request body too large", map[string]any{"max": 4194304})
		})
	}
	t.Run("Presign/TrailingWhiteSpace", func(t *testing.T) {
		res := post(t, presignURL(srv, ws.String()), srv.AdminToken, "application/json", []byte(one+" \r\n\t"))
		wantStatus(t, res, http.StatusOK)
	})
	t.Run("Presign/64FilesOver64KiB", func(t *testing.T) {
		var b bytes.Buffer
		b.WriteString(`{"files":[`)
		for i := range 64 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"name":"%s-%02d.bin","size":%d,"mimeType":"application/octet-stream"}`, strings.Repeat("n", 1400), i, 1000+i)
		}
		b.WriteString(`]}`)
		if b.Len() < 90<<10 {
			t.Fatalf("body of %d bytes, want over 90 KiB", b.Len())
		}
		res := post(t, presignURL(srv, ws.String()), srv.AdminToken, "application/json", b.Bytes())
		wantStatus(t, res, http.StatusOK)
		var pre presignAnswer
		decodeJSON(t, res.body, &pre)
		if len(pre.Uploads) != 64 {
			t.Fatalf("uploads: got %d, want 64", len(pre.Uploads))
		}
	})
}
