package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

const (
	canvasOrigin   = "https://canvas.example.com"
	otherOrigin    = "https://evil.example.net"
	corsOriginsEnv = canvasOrigin + ", http://localhost:5173"
)

// corsOrigins are corsOriginsEnv as the configuration reads them.
var corsOrigins = []string{canvasOrigin, "http://localhost:5173"}

// concretePath fills a route's path parameters.
func concretePath(path string, ws, id uuid.UUID) string {
	return strings.NewReplacer("{workspaceId}", ws.String(), "{fileId}", id.String()).Replace(path)
}

// preflightReq is a browser's preflight of method on u from origin.
func preflightReq(t *testing.T, u, origin, method string) *http.Request {
	t.Helper()
	req := newRequest(t, http.MethodOptions, u, "", "", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	return req
}

// corsHeaders returns the Access-Control-* headers of h.
func corsHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = strings.Join(v, ", ")
		}
	}
	return out
}

func wantAllowed(t *testing.T, what string, res result) {
	t.Helper()
	if got := res.header.Get("Access-Control-Allow-Origin"); got != canvasOrigin {
		t.Errorf("%s: Access-Control-Allow-Origin: got %q, want %q", what, got, canvasOrigin)
	}
	if got, want := res.header.Get("Access-Control-Expose-Headers"), "Content-Disposition, Content-Digest, Repr-Digest, Content-Range, Retry-After"; got != want {
		t.Errorf("%s: Access-Control-Expose-Headers: got %q, want %q", what, got, want)
	}
	if got := res.header.Get("Access-Control-Allow-Credentials"); got != "true" {
		t.Errorf("%s: Access-Control-Allow-Credentials: got %q, want true", what, got)
	}
	if got := res.header.Values("Vary"); !containsFold(got, "Origin") {
		t.Errorf("%s: Vary: got %q, want Origin among them", what, got)
	}
}

func containsFold(vs []string, want string) bool {
	for _, v := range vs {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), want) {
				return true
			}
		}
	}
	return false
}

// TestCORSPreflight: every route answers a listed origin's preflight with
// 204 and exactly API.md's headers, without a token, on the dev server's
// mux and on each function's own handler alike; an unlisted origin gets
// 204 with no CORS header at all (the browser refuses), and so does every
// origin when none is configured. Over the fake: CORS is HTTP's own
// (CORS_ALLOWED_ORIGINS reaching the API is TestCORSEveryAnswer's).
func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeOptions{Origins: corsOrigins})
	plain := newFakeServer(t, fakeOptions{})
	ws, id := uuid.New(), uuid.New()
	want := map[string]string{
		"Access-Control-Allow-Origin":      canvasOrigin,
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Methods":     "GET, POST, DELETE",
		"Access-Control-Allow-Headers":     "Authorization, Content-Type, Range, X-Molecule-Org-Slug",
		"Access-Control-Max-Age":           "600",
		"Access-Control-Expose-Headers":    "Content-Disposition, Content-Digest, Repr-Digest, Content-Range, Retry-After",
	}
	// Each function's handler, as its Lambda serves it.
	perFunction := map[string]string{}
	for _, rt := range httpapi.Routes {
		if _, ok := perFunction[rt.Function]; !ok {
			hs := httptest.NewServer(functionHandler(srv, rt.Function))
			t.Cleanup(hs.Close)
			perFunction[rt.Function] = hs.URL
		}
	}
	for _, rt := range httpapi.Routes {
		path := concretePath(rt.Path, ws, id)
		for door, base := range map[string]string{"mux": srv.URL, "function " + rt.Function: perFunction[rt.Function]} {
			t.Run(rt.Method+" "+rt.Path+" via "+door, func(t *testing.T) {
				res := send(t, preflightReq(t, base+path, canvasOrigin, rt.Method))
				wantStatus(t, res, http.StatusNoContent)
				got := corsHeaders(res.header)
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s: got %q, want %q", k, got[k], v)
					}
				}
				if len(got) != len(want) {
					t.Errorf("CORS headers: got %v, want exactly %v", got, want)
				}
				if !containsFold(res.header.Values("Vary"), "Origin") {
					t.Errorf("Vary: got %q, want Origin", res.header.Values("Vary"))
				}
				if len(res.body) != 0 {
					t.Errorf("body: got %q, want none", res.body)
				}

				res = send(t, preflightReq(t, base+path, otherOrigin, rt.Method))
				wantStatus(t, res, http.StatusNoContent)
				if got := corsHeaders(res.header); len(got) != 0 {
					t.Errorf("unlisted origin: got CORS headers %v, want none", got)
				}
			})
		}
		t.Run(rt.Method+" "+rt.Path+" without origins", func(t *testing.T) {
			res := send(t, preflightReq(t, plain.URL+path, canvasOrigin, rt.Method))
			wantStatus(t, res, http.StatusNoContent)
			if got := corsHeaders(res.header); len(got) != 0 {
				t.Errorf("no origins configured: got CORS headers %v, want none", got)
			}
			if v := res.header.Values("Vary"); len(v) != 0 {
				t.Errorf("no origins configured: got Vary %q, want none", v)
			}
		})
	}
	t.Run("UnknownPath", func(t *testing.T) {
		// No route: authentication comes first, and a preflight has no token.
		res := send(t, preflightReq(t, srv.URL+"/nowhere", canvasOrigin, "GET"))
		wantError(t, res, http.StatusUnauthorized, "missing workspace auth token", nil)
	})
}

// TestCORSEveryAnswer: for a listed origin, every answer carries
// Access-Control-Allow-Origin and -Expose-Headers: successes, the bytes
// of content, 4xx errors and 401s before any authentication; an unlisted
// origin gets the same answers without them.
func TestCORSEveryAnswer(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"CORS_ALLOWED_ORIGINS": corsOriginsEnv}})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)

	body, ctype := form(t, file("a.txt", "text/plain", "hello"))
	upload := newRequest(t, "POST", uploadsURL(srv, ws.String()), tok, ctype, strings.NewReader(string(body)))
	upload.Header.Set("Origin", canvasOrigin)
	res := send(t, upload)
	wantStatus(t, res, http.StatusOK)
	wantAllowed(t, "upload 200", res)
	f := jsonObject(t, res.body)["files"].([]any)[0].(map[string]any)
	id := f["file_id"].(string)

	cases := []struct {
		name, method, url, token string
		status                   int
	}{
		{"list 200", "GET", listURL(srv, ws.String()), tok, http.StatusOK},
		{"content 200", "GET", contentURL(srv, ws.String(), id), tok, http.StatusOK},
		{"content 404", "GET", contentURL(srv, ws.String(), uuid.NewString()), tok, http.StatusNotFound},
		{"ack 200", "POST", ackURL(srv, ws.String(), id), tok, http.StatusOK},
		{"list 401 missing", "GET", listURL(srv, ws.String()), "", http.StatusUnauthorized},
		{"list 401 invalid", "GET", listURL(srv, ws.String()), "nope", http.StatusUnauthorized},
		{"list 400", "GET", listURL(srv, ws.String()) + "?limit=0", tok, http.StatusBadRequest},
		{"unknown route 404", "GET", srv.URL + "/nowhere", tok, http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := newRequest(t, c.method, c.url, c.token, "", nil)
			req.Header.Set("Origin", canvasOrigin)
			res := send(t, req)
			wantStatus(t, res, c.status)
			wantAllowed(t, c.name, res)
			if got := res.header.Get("Access-Control-Allow-Methods"); got != "" {
				t.Errorf("Access-Control-Allow-Methods on a non-preflight answer: %q", got)
			}

			req = newRequest(t, c.method, c.url, c.token, "", nil)
			req.Header.Set("Origin", otherOrigin)
			res = send(t, req)
			if res.status != c.status {
				t.Errorf("unlisted origin: status %d, want %d", res.status, c.status)
			}
			if got := corsHeaders(res.header); len(got) != 0 {
				t.Errorf("unlisted origin: got CORS headers %v, want none", got)
			}
		})
	}
}
