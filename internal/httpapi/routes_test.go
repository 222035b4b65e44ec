package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestOnlyTheRouteTable: on the whole mux (the dev server's handler) and
// on each function's Handler, a route's path with a method not in Routes
// (HEAD included) is a JSON 405 with Allow that touches nothing, and a
// path that is not clean ("//", "/../", "/./", a trailing slash) is never
// redirected: a JSON 401 without a token, a JSON 404 with one.
func TestOnlyTheRouteTable(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	f := stage(t, srv, ws, "a.txt", "text/plain", "hello")
	paths := map[string]string{}     // by route path: list serves two
	methods := map[string][]string{} // a path's methods, in the table's order
	for _, rt := range httpapi.Routes {
		p := strings.ReplaceAll(rt.Path, "{workspaceId}", ws.String())
		p = strings.ReplaceAll(p, "{uploadId}", uuid.NewString())
		paths[rt.Path] = strings.ReplaceAll(p, "{fileId}", f.FileID)
		methods[rt.Path] = append(methods[rt.Path], rt.Method)
	}

	// Each door maps a function to the base URL that serves it.
	perFunction := map[string]string{}
	for _, rt := range httpapi.Routes {
		hs := httptest.NewServer(functionHandler(srv, rt.Function))
		t.Cleanup(hs.Close)
		perFunction[rt.Function] = hs.URL
	}
	doors := map[string]func(fn string) string{
		"Mux":     func(string) string { return srv.URL },
		"Handler": func(fn string) string { return perFunction[fn] },
	}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(t *testing.T, method, u, token string) result {
		t.Helper()
		req := newRequest(t, method, u, token, "", nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b []byte
		if method != "HEAD" {
			b, _ = io.ReadAll(resp.Body)
		}
		return result{status: resp.StatusCode, header: resp.Header, body: b}
	}

	for door, base := range doors {
		for _, rt := range httpapi.Routes {
			u := base(rt.Function) + paths[rt.Path]
			for _, m := range []string{"HEAD", "GET", "POST", "PUT", "DELETE", "PATCH"} {
				if slices.Contains(methods[rt.Path], m) {
					continue
				}
				t.Run(door+"/"+rt.Function+"/"+m, func(t *testing.T) {
					res := call(t, m, u, tok)
					if res.status != http.StatusMethodNotAllowed {
						t.Fatalf("status: got %d, want 405 (body %.200q)", res.status, res.body)
					}
					if got, want := res.header.Get("Allow"), strings.Join(methods[rt.Path], ", "); got != want {
						t.Errorf("Allow: got %q, want %q", got, want)
					}
					if got := res.header.Get("Content-Type"); got != "application/json" {
						t.Errorf("Content-Type: got %q, want application/json", got)
					}
					if m != "HEAD" {
						wantError(t, res, http.StatusMethodNotAllowed, "method not allowed", nil)
					}
				})
			}
			for name, bad := range map[string]string{
				"DoubleSlash":   strings.Replace(u, "/workspaces/", "//workspaces/", 1),
				"InnerDouble":   strings.Replace(u, "/workspaces/", "/workspaces//", 1),
				"DotDot":        strings.Replace(u, "/workspaces/", "/x/../workspaces/", 1),
				"Dot":           strings.Replace(u, "/workspaces/", "/./workspaces/", 1),
				"TrailingSlash": u + "/",
			} {
				t.Run(door+"/"+rt.Function+"/"+name, func(t *testing.T) {
					if rt.Path == httpapi.LimitsRoute.Path {
						// Public: an unclean limits path is a plain 404 below.
						wantError(t, call(t, rt.Method, strings.Replace(u, "/uploads/", "//uploads/", 1), tok), http.StatusNotFound, "not found", nil)
						return
					}
					wantError(t, call(t, rt.Method, bad, ""), http.StatusUnauthorized, msgMissing, nil)
					wantError(t, call(t, rt.Method, bad, "pu_nottoken"), http.StatusUnauthorized, msgInvalid, nil)
					wantError(t, call(t, rt.Method, bad, tok), http.StatusNotFound, "not found", nil)
				})
			}
		}
		t.Run(door+"/UnknownPath", func(t *testing.T) {
			wantError(t, call(t, "GET", base("list")+"/nowhere", ""), http.StatusUnauthorized, msgMissing, nil)
			wantError(t, call(t, "GET", base("list")+"/nowhere", tok), http.StatusNotFound, "not found", nil)
		})
	}

	// HEAD on content read nothing and stamped nothing.
	if fetched, _ := timestamps(t, srv, f.FileID); fetched != nil {
		t.Errorf("fetched_at after HEAD: got %v, want null", fetched)
	}
	if up, _ := rowCounts(t, srv, ws); up != 1 {
		t.Errorf("rows after the calls: got %d, want 1", up)
	}
}
