package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// wantContent checks a 200 of the content route: the bytes and every
// header of API.md.
func wantContent(t *testing.T, res result, content []byte, ctype, disposition string) {
	t.Helper()
	wantStatus(t, res, http.StatusOK)
	if !bytes.Equal(res.body, content) {
		t.Errorf("body: got %q, want %q", res.body, content)
	}
	sum := sha256.Sum256(content)
	want := map[string]string{
		"Content-Type":           ctype,
		"Content-Length":         fmt.Sprint(len(content)),
		"Content-Disposition":    disposition,
		"Content-Digest":         "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
		"Repr-Digest":            "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "private, no-store",
		"Accept-Ranges":          "bytes",
	}
	for k, v := range want {
		if got := res.header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s: got %q, want %q", k, got, v)
		}
	}
}

func TestContent(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})

	t.Run("OK", func(t *testing.T) {
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		f := stage(t, srv, ws, "report v2.pdf", "application/pdf", "%PDF-1.7 hello")
		res := get(t, contentURL(srv, ws.String(), f.FileID), tok)
		wantContent(t, res, []byte("%PDF-1.7 hello"), "application/pdf",
			`attachment; filename="report_v2.pdf"; filename*=UTF-8''report_v2.pdf`)
	})

	t.Run("OKOctetStreamWithoutMimetype", func(t *testing.T) {
		ws := uuid.New()
		f := stage(t, srv, ws, "data", "", "data")
		wantContent(t, get(t, contentURL(srv, ws.String(), f.FileID), srv.AdminToken), []byte("data"),
			"application/octet-stream", `attachment; filename="data"; filename*=UTF-8''data`)
	})

	t.Run("OKNonUTF8ByteExact", func(t *testing.T) {
		ws := uuid.New()
		content := make([]byte, 0, 512)
		for i := range 256 {
			content = append(content, byte(i))
		}
		content = append(content, 0xff, 0xfe, 0xc3, 0x28, 0xe2, 0x82, 0x00, 0x0d, 0x0a, 0x80)
		f := uploadParts(t, srv, ws.String(), srv.AdminToken, part{filename: "bin.dat", ctype: "text/plain", content: content})[0]
		wantContent(t, get(t, contentURL(srv, ws.String(), f.FileID), srv.AdminToken), content,
			"text/plain", `attachment; filename="bin.dat"; filename*=UTF-8''bin.dat`)
	})

	t.Run("FetchedAtStampedAndMoving", func(t *testing.T) {
		ws := uuid.New()
		f := stage(t, srv, ws, "f", "", "f")
		if fetched, _ := timestamps(t, srv, f.FileID); fetched != nil {
			t.Fatalf("fetched_at before a fetch: got %v, want nil", fetched)
		}
		wantStatus(t, get(t, contentURL(srv, ws.String(), f.FileID), srv.AdminToken), http.StatusOK)
		first, _ := timestamps(t, srv, f.FileID)
		if first == nil {
			t.Fatal("fetched_at after a fetch: got nil, want set")
		}
		time.Sleep(5 * time.Millisecond)
		wantStatus(t, get(t, contentURL(srv, ws.String(), f.FileID), srv.AdminToken), http.StatusOK)
		second, _ := timestamps(t, srv, f.FileID)
		if second == nil || !second.After(*first) {
			t.Errorf("fetched_at after a second fetch: got %v, want after %v", second, first)
		}
	})

	// Stored names went through SanitizeFilename; rows written around it
	// test the header's own escaping.
	t.Run("DispositionEscaping", func(t *testing.T) {
		for _, tt := range []struct {
			name, raw, want string
		}{
			{"QuoteBackslashNonASCII", `say "hi" \ résumé.txt`,
				`attachment; filename="say \"hi\" \\ r_sum_.txt"; filename*=UTF-8''say%20%22hi%22%20%5C%20r%C3%A9sum%C3%A9.txt`},
			{"CRLFDropped", "a\r\nSet-Cookie: x=1.txt",
				`attachment; filename="aSet-Cookie: x=1.txt"; filename*=UTF-8''aSet-Cookie%3A%20x%3D1.txt`},
			{"CJK", "中文.docx",
				`attachment; filename="__.docx"; filename*=UTF-8''%E4%B8%AD%E6%96%87.docx`},
			{"Separators", "a;b=c,d'e%f~.txt",
				`attachment; filename="a;b=c,d'e%f~.txt"; filename*=UTF-8''a%3Bb%3Dc%2Cd%27e%25f~.txt`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				ws := uuid.New()
				rec, err := stageOne(srv, ws, []byte("x"), tt.raw, "text/plain")
				if err != nil {
					t.Fatal(err)
				}
				res := get(t, contentURL(srv, ws.String(), rec.FileID.String()), srv.AdminToken)
				wantContent(t, res, []byte("x"), "text/plain", tt.want)
				if _, ok := res.header["Set-Cookie"]; ok {
					t.Errorf("Set-Cookie: got %q, want none", res.header["Set-Cookie"])
				}
			})
		}
	})

	t.Run("Gone", func(t *testing.T) {
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		expired := stage(t, srv, ws, "expired", "", "e")
		expire(t, srv, expired.FileID)
		acked := stage(t, srv, ws, "acked", "", "a")
		wantStatus(t, post(t, ackURL(srv, ws.String(), acked.FileID), tok, "", nil), http.StatusOK)
		for _, tt := range []struct{ name, id string }{
			{"Absent", uuid.NewString()},
			{"Expired", expired.FileID},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for _, token := range []string{tok, srv.AdminToken} {
					wantError(t, get(t, contentURL(srv, ws.String(), tt.id), token), http.StatusNotFound, msgExpired, nil)
				}
			})
		}
		t.Run("AckedNotSweptIsServed", func(t *testing.T) {
			wantContent(t, get(t, contentURL(srv, ws.String(), acked.FileID), tok), []byte("a"), "application/octet-stream",
				`attachment; filename="acked"; filename*=UTF-8''acked`)
		})
		t.Run("Swept", func(t *testing.T) {
			if _, err := srv.Pool.Exec(context.Background(), `DELETE FROM pending_uploads WHERE file_id = $1`, acked.FileID); err != nil {
				t.Fatal(err)
			}
			wantError(t, get(t, contentURL(srv, ws.String(), acked.FileID), tok), http.StatusNotFound, msgExpired, nil)
		})
	})

	t.Run("OtherWorkspacesFile", func(t *testing.T) {
		owner, other := uuid.New(), uuid.New()
		secret := "SECRET-BYTES-" + uuid.NewString()
		f := stage(t, srv, owner, "secret.txt", "text/plain", secret)
		otherTok := srv.WorkspaceToken(t, other)
		for _, tt := range []struct{ name, token string }{
			{"AdminOnTheWrongWorkspace", srv.AdminToken},
			{"OtherWorkspacesToken", otherTok},
		} {
			t.Run(tt.name, func(t *testing.T) {
				res := get(t, contentURL(srv, other.String(), f.FileID), tt.token)
				wantError(t, res, http.StatusNotFound, msgExpired, nil)
				if strings.Contains(string(res.body), secret) || res.header.Get("Content-Disposition") != "" {
					t.Errorf("response: got %q with %v, want no bytes and no file headers", res.body, res.header)
				}
				if fetched, _ := timestamps(t, srv, f.FileID); fetched != nil {
					t.Errorf("fetched_at: got %v, want nil", fetched)
				}
			})
		}
		// The owner still gets it.
		res := get(t, contentURL(srv, owner.String(), f.FileID), srv.WorkspaceToken(t, owner))
		wantContent(t, res, []byte(secret), "text/plain", `attachment; filename="secret.txt"; filename*=UTF-8''secret.txt`)
	})
}

// TestUnsatisfiableRangeStampsNothing: fetched_at moves only when bytes
// (200, 206) or a redirect (307) go out; a 416 sent nothing.
func TestUnsatisfiableRangeStampsNothing(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	f := stage(t, srv, ws, "ten.txt", "text/plain", "0123456789")
	for _, rng := range []string{"bytes=10-", "bytes=100-200", "bytes=-0"} {
		req := newRequest(t, "GET", contentURL(srv, ws.String(), f.FileID), srv.AdminToken, "", nil)
		req.Header.Set("Range", rng)
		res := send(t, req)
		wantError(t, res, http.StatusRequestedRangeNotSatisfiable, "range not satisfiable", nil)
		if got := res.header.Get("Content-Range"); got != "bytes */10" {
			t.Errorf("%s: Content-Range %q, want bytes */10", rng, got)
		}
		if fetched, _ := timestamps(t, srv, f.FileID); fetched != nil {
			t.Fatalf("%s: a 416 stamped fetched_at %v", rng, fetched)
		}
	}
	req := newRequest(t, "GET", contentURL(srv, ws.String(), f.FileID), srv.AdminToken, "", nil)
	req.Header.Set("Range", "bytes=9-")
	res := send(t, req)
	wantStatus(t, res, http.StatusPartialContent)
	if string(res.body) != "9" {
		t.Fatalf("206: got %q", res.body)
	}
	if fetched, _ := timestamps(t, srv, f.FileID); fetched == nil {
		t.Fatal("a 206 left fetched_at unset")
	}
}

// TestEveryServedAnswerStampsFetchedAt: round 6's requests, on a
// 500-byte file inline and in the bucket, through the content route and
// a download link: fetched_at is stamped exactly when the answer sends
// the file (200, 206) or a redirect (307), read back from Postgres. A
// Range that If-Range discards (another tag, a date, a weak or
// upper-case spelling of the file's tag) is a 200 of the whole file and
// stamps, even when the range alone would have been unsatisfiable; a 416
// stamps nothing.
func TestEveryServedAnswerStampsFetchedAt(t *testing.T) {
	t.Parallel()
	content := bytes.Repeat([]byte("0123456789"), 50) // 500 bytes
	tag := `"` + sha256Hex(content) + `"`
	other := `"` + sha256Hex([]byte("another version")) + `"`
	const date = "Sun, 06 Dec 2026 05:00:00 GMT"
	cases := []struct {
		name     string
		header   []string
		redirect bool // content route only
		status   int
	}{
		{"Whole", nil, false, http.StatusOK},
		{"PastTheEndWithAnotherIfRange", []string{"Range", "bytes=1000-", "If-Range", other}, false, http.StatusOK},
		{"PastTheEndWithAnIfRangeNotATag", []string{"Range", "bytes=1000-", "If-Range", `"another"`}, false, http.StatusOK},
		{"SuffixZeroWithAnotherIfRange", []string{"Range", "bytes=-0", "If-Range", other}, false, http.StatusOK},
		{"PastTheEndWithADateIfRange", []string{"Range", "bytes=1000-", "If-Range", date}, false, http.StatusOK},
		{"SuffixZeroWithADateIfRange", []string{"Range", "bytes=-0", "If-Range", date}, false, http.StatusOK},
		{"PastTheEndWithItsWeakTag", []string{"Range", "bytes=1000-", "If-Range", "W/" + tag}, false, http.StatusOK},
		{"PastTheEndWithItsTagUpperCase", []string{"Range", "bytes=1000-", "If-Range", strings.ToUpper(tag)}, false, http.StatusOK},
		{"RangeWithItsTag", []string{"Range", "bytes=10-", "If-Range", tag}, false, http.StatusPartialContent},
		{"RangeWithADate", []string{"Range", "bytes=10-", "If-Range", date}, false, http.StatusOK},
		{"Range", []string{"Range", "bytes=-10"}, false, http.StatusPartialContent},
		{"PastTheEndWithItsTag", []string{"Range", "bytes=1000-", "If-Range", tag}, false, http.StatusRequestedRangeNotSatisfiable},
		{"SuffixZero", []string{"Range", "bytes=-0"}, false, http.StatusRequestedRangeNotSatisfiable},
		{"PastTheEnd", []string{"Range", "bytes=500-"}, false, http.StatusRequestedRangeNotSatisfiable},
		{"RedirectPastTheEndWithAnotherIfRange", []string{"Range", "bytes=1000-", "If-Range", other}, true, http.StatusTemporaryRedirect},
	}
	for _, place := range []struct {
		name string
		opts apptest.Options
	}{
		{"Inline", apptest.Options{}},
		{"InTheBucket", apptest.Options{S3: true, Env: map[string]string{"INLINE_MAX_BYTES": "100"}}},
	} {
		t.Run(place.name, func(t *testing.T) {
			t.Parallel()
			srv := apptest.NewServer(t, place.opts)
			ws := uuid.New()
			f := uploadParts(t, srv, ws.String(), srv.AdminToken, part{filename: "five-hundred.bin", ctype: "application/octet-stream", content: content})[0]
			if place.opts.S3 {
				if n, err := srv.Objects.Size(context.Background(), "objects/"+ws.String()+"/"+f.FileID); err != nil || n != 500 {
					t.Fatalf("the file's object: got %d bytes, %v; want it in the bucket", n, err)
				}
			}
			link, _ := mintLink(t, srv, ws.String(), f.FileID, srv.AdminToken)
			for _, route := range []string{"content", "download"} {
				for _, tc := range cases {
					status := tc.status
					if tc.redirect && (route == "download" || !place.opts.S3) {
						if route == "download" {
							continue // a link takes no redirect
						}
						status = http.StatusOK // an inline file is sent
					}
					t.Run(route+"/"+tc.name, func(t *testing.T) {
						sqlExec(t, srv, `UPDATE pending_uploads SET fetched_at = NULL WHERE file_id = $1`, f.FileID)
						u, token := link.String(), ""
						if route == "content" {
							u, token = contentURL(srv, ws.String(), f.FileID), srv.AdminToken
							if tc.redirect {
								u += "?redirect=1"
							}
						}
						req := newRequest(t, "GET", u, token, "", nil)
						for i := 0; i+1 < len(tc.header); i += 2 {
							req.Header.Set(tc.header[i], tc.header[i+1])
						}
						res := noRedirectSend(t, req)
						if res.status != status {
							t.Fatalf("status: got %d %.80q, want %d", res.status, res.body, status)
						}
						if status == http.StatusOK && !bytes.Equal(res.body, content) {
							t.Errorf("200: got %d bytes, want the whole file", len(res.body))
						}
						fetched, _ := timestamps(t, srv, f.FileID)
						if served := status != http.StatusRequestedRangeNotSatisfiable; served != (fetched != nil) {
							t.Errorf("fetched_at after a %d: got %v, want stamped %v", status, fetched, served)
						}
					})
				}
			}
		})
	}
}

// noRedirectSend is send with noRedirect: a 307 is the answer.
func noRedirectSend(t *testing.T, req *http.Request) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	resp, err := noRedirect.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestDigestsOfRangeAndWhole: RFC 9530 on every answer with bytes, of
// both routes, inline and from the bucket: Repr-Digest is the whole
// file's on a 200 and a 206; Content-Digest is over the bytes in the
// message: the whole file on a 200, and a 206 has none (a generic
// verifier rejected every 206, whose Content-Digest was the whole
// file's). ETag stays the whole file's.
func TestDigestsOfRangeAndWhole(t *testing.T) {
	t.Parallel()
	content := bytes.Repeat([]byte("abcdefghij"), 50)
	digest := func(b []byte) string {
		sum := sha256.Sum256(b)
		return "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
	}
	for _, place := range []struct {
		name string
		opts apptest.Options
	}{
		{"Inline", apptest.Options{}},
		{"InTheBucket", apptest.Options{S3: true, Env: map[string]string{"INLINE_MAX_BYTES": "100"}}},
	} {
		t.Run(place.name, func(t *testing.T) {
			t.Parallel()
			srv := apptest.NewServer(t, place.opts)
			ws := uuid.New()
			f := uploadParts(t, srv, ws.String(), srv.AdminToken, part{filename: "d.bin", ctype: "application/octet-stream", content: content})[0]
			link, _ := mintLink(t, srv, ws.String(), f.FileID, srv.AdminToken)
			for _, route := range []string{"content", "download"} {
				for _, rng := range []string{"", "bytes=100-", "bytes=-7", "bytes=0-0", "bytes=0-"} {
					t.Run(route+"/"+rng, func(t *testing.T) {
						u, token := link.String(), ""
						if route == "content" {
							u, token = contentURL(srv, ws.String(), f.FileID), srv.AdminToken
						}
						req := newRequest(t, "GET", u, token, "", nil)
						if rng != "" {
							req.Header.Set("Range", rng)
						}
						res := send(t, req)
						want := http.StatusOK
						if rng != "" {
							want = http.StatusPartialContent
						}
						if res.status != want {
							t.Fatalf("status: got %d, want %d", res.status, want)
						}
						if got := res.header.Values("Repr-Digest"); len(got) != 1 || got[0] != digest(content) {
							t.Errorf("Repr-Digest: got %q, want the whole file's %q", got, digest(content))
						}
						cd := res.header.Values("Content-Digest")
						switch {
						case want == http.StatusOK && (len(cd) != 1 || cd[0] != digest(res.body) || !bytes.Equal(res.body, content)):
							t.Errorf("200 Content-Digest: got %q, want the whole file's %q", cd, digest(content))
						case want == http.StatusPartialContent && len(cd) != 0 && (len(cd) != 1 || cd[0] != digest(res.body)):
							t.Errorf("206 Content-Digest: got %q, want none or the range's %q", cd, digest(res.body))
						}
						if tag := res.header.Get("ETag"); tag != `"`+sha256Hex(content)+`"` {
							t.Errorf("ETag: got %q, want the whole file's", tag)
						}
					})
				}
			}
		})
	}
}
