package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

func linkURL(srv *apptest.Server, ws, id string) string {
	return srv.URL + "/workspaces/" + ws + "/pending-uploads/" + id + "/link"
}

// mintLink asks the link route for a link to file id of ws as token's
// holder and returns it resolved against the route's URL, with its
// signature (for the log checks).
func mintLink(t *testing.T, srv *apptest.Server, ws, id, token string) (link *url.URL, signature string) {
	t.Helper()
	res := post(t, linkURL(srv, ws, id), token, "", nil)
	wantStatus(t, res, http.StatusOK)
	return resolveLink(t, linkURL(srv, ws, id), res)
}

// resolveLink reads a link route's 200 and resolves its url against
// base, the route's URL, as API.md says.
func resolveLink(t *testing.T, base string, res result) (*url.URL, string) {
	t.Helper()
	var body struct {
		URL       string    `json:"url"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(res.body, &body); err != nil {
		t.Fatalf("link answer %q: %v", res.body, err)
	}
	if got := res.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("link answer Cache-Control: got %q, want no-store", got)
	}
	if d := time.Until(body.ExpiresAt); d <= 4*time.Minute || d > 5*time.Minute {
		t.Errorf("expires_at %v: want 5 minutes from now (DOWNLOAD_LINK_TTL's default)", body.ExpiresAt)
	}
	rel, err := url.Parse(body.URL)
	if err != nil || rel.IsAbs() || rel.Host != "" || strings.HasPrefix(body.URL, "/") {
		t.Fatalf("url %q: want a reference relative to the link route's URL (%v)", body.URL, err)
	}
	b, _ := url.Parse(base)
	u := b.ResolveReference(rel)
	sig := u.Query().Get(downloadlink.ParamSignature)
	if sig == "" || strings.Contains(u.Path, sig) {
		t.Fatalf("link %s: want the signature in the query string, not the path", u)
	}
	return u, sig
}

// bare is a GET as a browser's navigation to a link sends it: no
// Authorization, no cookie.
func bare(t *testing.T, u string, header ...string) result {
	t.Helper()
	req := newRequest(t, "GET", u, "", "", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return send(t, req)
}

// alter returns u with its query changed by edit.
func alter(u *url.URL, edit func(q url.Values)) string {
	v := *u
	q := v.Query()
	edit(q)
	v.RawQuery = q.Encode()
	return v.String()
}

// TestLink: a caller the content route serves gets a link to one file
// of its workspace; the link opens with a bare GET and answers the
// content route's bytes and headers (Range too), with Referrer-Policy:
// no-referrer, and stamps fetched_at and counts the fetch as content
// does (minting does neither); it works after the ack until the sweep.
// Another workspace's caller gets no link; an altered link, another
// file's, or one past its time is a 403 with its code; the signature is
// in no log line.
func TestLink(t *testing.T) {
	t.Parallel()
	logs, metricsOut := &syncBuffer{}, &syncBuffer{}
	srv := apptest.NewServer(t, apptest.Options{Log: logs, MetricsOut: metricsOut})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	const content = "%PDF-1.7 the canvas re-opens this"
	f := stage(t, srv, ws, "report v2.pdf", "application/pdf", content)
	var sigs []string

	link, sig := mintLink(t, srv, ws.String(), f.FileID, tok)
	sigs = append(sigs, sig)
	if fetched, _ := timestamps(t, srv, f.FileID); fetched != nil {
		t.Fatalf("fetched_at after minting a link: got %v, want nil (the download stamps it)", fetched)
	}
	if strings.Contains(metricsOut.String(), `"`+metrics.Fetched+`"`) {
		t.Fatalf("a link minted counted as a fetch: %s", metricsOut)
	}

	t.Run("OpensBare", func(t *testing.T) {
		res := bare(t, link.String())
		wantContent(t, res, []byte(content), "application/pdf", `attachment; filename="report_v2.pdf"; filename*=UTF-8''report_v2.pdf`)
		if got := res.header.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("Referrer-Policy: got %q, want no-referrer", got)
		}
		if fetched, _ := timestamps(t, srv, f.FileID); fetched == nil {
			t.Error("fetched_at after a link download: got nil, want set")
		}
		if !strings.Contains(metricsOut.String(), `"`+metrics.Fetched+`":1`) {
			t.Errorf("a link download not counted as Fetched: %s", metricsOut)
		}
	})

	t.Run("Range", func(t *testing.T) {
		res := bare(t, link.String(), "Range", "bytes=4-")
		wantStatus(t, res, http.StatusPartialContent)
		if string(res.body) != content[4:] || res.header.Get("Content-Range") != fmt.Sprintf("bytes 4-%d/%d", len(content)-1, len(content)) {
			t.Errorf("206: got %q, Content-Range %q", res.body, res.header.Get("Content-Range"))
		}
	})

	t.Run("ResumableWithIfRange", func(t *testing.T) {
		// A browser's download manager resumes only an answer with a
		// strong validator, and sends it back in If-Range.
		tag := bare(t, link.String()).header.Get("ETag")
		if want := `"` + sha256Hex([]byte(content)) + `"`; tag != want {
			t.Fatalf("ETag: got %q, want %q", tag, want)
		}
		res := bare(t, link.String(), "Range", "bytes=10-", "If-Range", tag)
		if res.status != http.StatusPartialContent || string(res.body) != content[10:] {
			t.Errorf("Range with a matching If-Range: got %d %q, want 206 %q", res.status, res.body, content[10:])
		}
		res = bare(t, link.String(), "Range", "bytes=10-", "If-Range", `"another"`)
		if res.status != http.StatusOK || string(res.body) != content {
			t.Errorf("Range with another If-Range: got %d %q, want 200 and the whole file", res.status, res.body)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		for _, tc := range []struct {
			name, u string
		}{
			{"SignatureAltered", alter(link, func(q url.Values) {
				s := []byte(q.Get("signature"))
				s[3] ^= 1
				q.Set("signature", string(s))
			})},
			{"ExpiresMoved", alter(link, func(q url.Values) { q.Set("expires", q.Get("expires")+"0") })},
			{"NoSignature", alter(link, func(q url.Values) { q.Del("signature") })},
			{"NoQuery", strings.Split(link.String(), "?")[0]},
			{"SignatureTwice", alter(link, func(q url.Values) { q.Add("signature", q.Get("signature")) })},
			{"AnotherFile", strings.Replace(link.String(), f.FileID, uuid.NewString(), 1)},
			{"AnotherWorkspace", strings.Replace(link.String(), ws.String(), uuid.NewString(), 1)},
			{"NotAUUID", strings.Replace(link.String(), f.FileID, "not-a-uuid", 1)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := bare(t, tc.u)
				wantError(t, res, http.StatusForbidden, msgLinkInvalid, nil)
				if got := res.header.Get("Referrer-Policy"); got != "no-referrer" {
					t.Errorf("Referrer-Policy: got %q, want no-referrer", got)
				}
			})
		}
		t.Run("UnknownParam", func(t *testing.T) {
			wantError(t, bare(t, alter(link, func(q url.Values) { q.Set("redirect", "1") })), http.StatusBadRequest, "unknown query parameter", nil)
		})
	})

	t.Run("Expired", func(t *testing.T) {
		// A link this deployment signed an hour ago (the server's key, a
		// clock an hour back): past its time now.
		old, err := downloadlink.New(apptest.LinkKey, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		old.Now = func() time.Time { return time.Now().Add(-time.Hour) }
		l, err := old.Sign(context.Background(), ws, uuid.MustParse(f.FileID))
		if err != nil {
			t.Fatal(err)
		}
		u := strings.TrimSuffix(linkURL(srv, ws.String(), f.FileID), "link") + "download?" + l.Query
		sigs = append(sigs, l.Query)
		wantError(t, bare(t, u), http.StatusForbidden, msgLinkExpired, nil)
		// The same signer's link of now opens: the key is the server's.
		old.Now = time.Now
		if l, err = old.Sign(context.Background(), ws, uuid.MustParse(f.FileID)); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, bare(t, strings.TrimSuffix(linkURL(srv, ws.String(), f.FileID), "link")+"download?"+l.Query), http.StatusOK)
	})

	t.Run("AnotherWorkspacesCallerGetsNoLink", func(t *testing.T) {
		other := uuid.New()
		otherTok := srv.WorkspaceToken(t, other)
		// Its token on this workspace's path: content's 401.
		wantError(t, post(t, linkURL(srv, ws.String(), f.FileID), otherTok, "", nil), http.StatusUnauthorized, msgInvalid, nil)
		// Its own path, this workspace's file: content's 404.
		wantError(t, post(t, linkURL(srv, other.String(), f.FileID), otherTok, "", nil), http.StatusNotFound, msgExpired, nil)
		wantError(t, post(t, linkURL(srv, other.String(), f.FileID), srv.AdminToken, "", nil), http.StatusNotFound, msgExpired, nil)
		// No credential at all.
		wantError(t, post(t, linkURL(srv, ws.String(), f.FileID), "", "", nil), http.StatusUnauthorized, msgMissing, nil)
		wantError(t, post(t, linkURL(srv, ws.String(), uuid.NewString()), tok, "", nil), http.StatusNotFound, msgExpired, nil)
	})

	t.Run("AfterTheAckUntilTheSweep", func(t *testing.T) {
		g := stage(t, srv, ws, "acked.txt", "text/plain", "acked, not swept")
		before, s1 := mintLink(t, srv, ws.String(), g.FileID, tok)
		wantStatus(t, post(t, ackURL(srv, ws.String(), g.FileID), tok, "", nil), http.StatusOK)
		after, s2 := mintLink(t, srv, ws.String(), g.FileID, tok)
		sigs = append(sigs, s1, s2)
		for _, u := range []*url.URL{before, after} {
			if res := bare(t, u.String()); res.status != http.StatusOK || string(res.body) != "acked, not swept" {
				t.Fatalf("after the ack: got %d %q", res.status, res.body)
			}
		}
		sqlExec(t, srv, `DELETE FROM pending_uploads WHERE file_id = $1`, g.FileID) // the sweep
		wantError(t, bare(t, after.String()), http.StatusNotFound, msgExpired, nil)
		wantError(t, post(t, linkURL(srv, ws.String(), g.FileID), tok, "", nil), http.StatusNotFound, msgExpired, nil)
	})

	t.Run("SecretInNoLogLine", func(t *testing.T) {
		out := logs.String()
		if !strings.Contains(out, `"via":"link"`) || !strings.Contains(out, `"msg":"linked"`) {
			t.Fatalf("logs lack the link's lines: %s", out)
		}
		for _, s := range sigs {
			for _, part := range strings.Split(s, "&") { // a query: each value alone too
				if _, v, _ := strings.Cut(part, "signature="); v != "" && strings.Contains(out, v) {
					t.Errorf("a log line carries a link's signature %s", v)
				}
			}
			if strings.Contains(out, s) {
				t.Errorf("a log line carries a link's signature %s", s)
			}
		}
	})
}

// TestLinkFromTheBucket: a bucket-held file opens through its link as
// its content does, streamed by the function (not redirected), Range
// included.
func TestLinkFromTheBucket(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"INLINE_MAX_BYTES": "1024"}})
	ws := uuid.New()
	data := bytes.Repeat([]byte("0123456789abcdef"), 8192) // 128 KiB, above INLINE_MAX_BYTES
	f := uploadParts(t, srv, ws.String(), srv.AdminToken, part{filename: "big.bin", ctype: "application/octet-stream", content: data})[0]
	if n, err := srv.Objects.Size(context.Background(), "objects/"+ws.String()+"/"+f.FileID); err != nil || n != int64(len(data)) {
		t.Fatalf("the file's object: got %d bytes, %v; want it in the bucket", n, err)
	}
	link, _ := mintLink(t, srv, ws.String(), f.FileID, srv.AdminToken)
	wantContent(t, bare(t, link.String()), data, "application/octet-stream", `attachment; filename="big.bin"; filename*=UTF-8''big.bin`)
	res := bare(t, link.String(), "Range", "bytes=65536-")
	wantStatus(t, res, http.StatusPartialContent)
	if !bytes.Equal(res.body, data[65536:]) {
		t.Errorf("206 from the bucket: got %d bytes, want %d", len(res.body), len(data)-65536)
	}
}

// TestLinkWithASession: the canvas's production credential mints a link
// under the session's CSRF rules: from the canvas's origin it gets one,
// from a foreign origin the content route's 403.
func TestLinkWithASession(t *testing.T) {
	t.Parallel()
	srv, cp := sessionServer(t, nil)
	const session = "s3cr3t-member-session"
	cp.AddMember(session, "user-7")
	ws := uuid.New()
	f := stage(t, srv, ws, "a.txt", "text/plain", "from the session")
	res := send(t, cookieReq(t, "POST", linkURL(srv, ws.String(), f.FileID), session, canvasOrigin, "", nil))
	wantStatus(t, res, http.StatusOK)
	link, _ := resolveLink(t, linkURL(srv, ws.String(), f.FileID), res)
	if got := bare(t, link.String()); got.status != http.StatusOK || string(got.body) != "from the session" {
		t.Fatalf("link: got %d %q", got.status, got.body)
	}
	wantError(t, send(t, cookieReq(t, "POST", linkURL(srv, ws.String(), f.FileID), session, "https://evil.example.com", "", nil)),
		http.StatusForbidden, "cross-origin request refused", nil)
}

// TestDownloadReferrerPolicyOnEveryAnswer: every answer of the download
// route carries Referrer-Policy: no-referrer, whatever answers it: the
// handler (200, 206, 416, 404, 403), the query check before it (round 6:
// the 400s of "&x=1" and of a ";"-separated query lacked it), front (the
// 405 for HEAD and POST, round 6 too) and the preflight.
func TestDownloadReferrerPolicyOnEveryAnswer(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"CORS_ALLOWED_ORIGINS": canvasOrigin}})
	ws := uuid.New()
	f := stage(t, srv, ws, "five.txt", "text/plain", "01234")
	link, _ := mintLink(t, srv, ws.String(), f.FileID, srv.AdminToken)
	swept := stage(t, srv, ws, "swept.txt", "text/plain", "gone")
	sweptLink, _ := mintLink(t, srv, ws.String(), swept.FileID, srv.AdminToken)
	sqlExec(t, srv, `DELETE FROM pending_uploads WHERE file_id = $1`, swept.FileID)
	old, err := downloadlink.New(apptest.LinkKey, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	old.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	oldLink, err := old.Sign(context.Background(), ws, uuid.MustParse(f.FileID))
	if err != nil {
		t.Fatal(err)
	}
	expired := strings.Split(link.String(), "?")[0] + "?" + oldLink.Query
	raw := link.RawQuery
	base := strings.Split(link.String(), "?")[0]

	for _, tc := range []struct {
		name, method, u string
		header          []string
		status          int
	}{
		{"OK", "GET", link.String(), nil, http.StatusOK},
		{"Range", "GET", link.String(), []string{"Range", "bytes=2-"}, http.StatusPartialContent},
		{"RangeNotSatisfiable", "GET", link.String(), []string{"Range", "bytes=5-"}, http.StatusRequestedRangeNotSatisfiable},
		{"Swept", "GET", sweptLink.String(), nil, http.StatusNotFound},
		{"Invalid", "GET", base + "?" + strings.Replace(raw, "signature=", "signature=x", 1), nil, http.StatusForbidden},
		{"NoQuery", "GET", base, nil, http.StatusForbidden},
		{"Expired", "GET", expired, nil, http.StatusForbidden},
		{"UnknownParam", "GET", link.String() + "&x=1", nil, http.StatusBadRequest},
		{"EmptyPair", "GET", base + "?&" + raw, nil, http.StatusBadRequest},
		{"SemicolonSeparated", "GET", base + "?" + strings.ReplaceAll(raw, "&", ";"), nil, http.StatusBadRequest},
		{"BadEscape", "GET", link.String() + "&%zz=1", nil, http.StatusBadRequest},
		{"HEAD", "HEAD", link.String(), nil, http.StatusMethodNotAllowed},
		{"POST", "POST", link.String(), nil, http.StatusMethodNotAllowed},
		{"DELETE", "DELETE", link.String(), nil, http.StatusMethodNotAllowed},
		{"Preflight", "OPTIONS", link.String(), []string{"Origin", canvasOrigin, "Access-Control-Request-Method", "GET"}, http.StatusNoContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, tc.method, tc.u, "", "", nil)
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			res := send(t, req)
			if res.status != tc.status {
				t.Fatalf("status: got %d %s, want %d", res.status, res.body, tc.status)
			}
			if got := res.header.Values("Referrer-Policy"); len(got) != 1 || got[0] != "no-referrer" {
				t.Errorf("Referrer-Policy: got %q, want no-referrer", got)
			}
		})
	}
}
