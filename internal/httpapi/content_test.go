package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
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
