package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/cptest"
)

const tenantSlug = "acme"

// canvasPages serves the canvas stand-in (testdata/canvas) at /, the
// harness and the client module under /page/, and, with api set, the
// service's paths through a reverse proxy: the platform's edge routing
// them on the canvas's own origin.
func canvasPages(t *testing.T, api string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(filepath.Join("testdata", "canvas"))))
	mux.Handle("/page/", http.StripPrefix("/page/", http.FileServer(http.Dir(filepath.Join("testdata", "page")))))
	serveClient(t, mux, "/page/")
	if api != "" {
		u, err := url.Parse(api)
		if err != nil {
			t.Fatal(err)
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		mux.Handle("/workspaces/", rp)
		mux.Handle("/uploads/", rp)
	}
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// seen is one request that reached the service, with its answer.
type seen struct {
	method, path, origin, fetchSite string
	status                          int
}

// recorder notes every request that reaches h.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{r.Method, r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), sw.status})
		rec.mu.Unlock()
	})
}

func (rec *recorder) all() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.reqs...)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) { w.status = s; w.ResponseWriter.WriteHeader(s) }

type canvasResult struct {
	OK        bool   `json:"ok"`
	Status    int    `json:"status"`
	Body      string `json:"body"`
	Error     string `json:"error"`
	Code      string `json:"code"`
	Staged    []struct{ FileID, URI, Name, SHA256 string }
	Downloads []struct {
		Status int    `json:"status"`
		Size   int64  `json:"size"`
		Type   string `json:"type"`
		SHA256 string `json:"sha256"`
		Error  string `json:"error"`
	} `json:"downloads"`
	Downloaded struct {
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"downloaded"`
}

type attackResult struct {
	Form   string `json:"form"`
	NoCors string `json:"noCors"`
	Ack    string `json:"ack"`
	Read   any    `json:"read"`
	Img    string `json:"img"`
}

// TestCanvasWithSessionCookie plays the platform's canvas exactly, in
// Chromium: no bearer, credentials "include", X-Molecule-Org-Slug, the
// control plane's session cookie, a multipart upload and the download of
// each attachment, against the service with a control-plane stand-in
// (a real HTTP server). Cross-origin, through credentialed CORS; same
// origin, through a reverse proxy that serves the page and forwards the
// API's paths; and through the client module in session mode. A refused
// cookie is a 401 the page can read, a control plane that fails a 503;
// the control plane is asked once for the whole run. A page of another
// origin on the same site makes the browser send the cookie with a form
// POST, a no-cors fetch, a credentialed read and an <img>: each is 403,
// and nothing is stored or stamped.
func TestCanvasWithSessionCookie(t *testing.T) {
	chromium, node := requireBrowser(t)
	cp := cptest.Start(t, tenantSlug)
	const member = "canvas-session-0123456789"
	cp.AddMember(member, "user-canvas")

	cross := canvasPages(t, "")
	rec := &recorder{}
	// The proxy and the service: the proxy's origin is the service's
	// public origin, so the service is configured after it starts.
	var service http.Handler
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { service.ServeHTTP(w, r) }))
	t.Cleanup(api.Close)
	same := canvasPages(t, api.URL)
	foreign := canvasPages(t, "")
	env := cp.Env()
	env["CORS_ALLOWED_ORIGINS"] = cross.URL
	env["PUBLIC_ORIGIN"] = same.URL
	env["WORKSPACE_MAX_PENDING_FILES"] = "64"
	srv := apptest.NewServer(t, apptest.Options{Env: env})
	service = rec.wrap(srv.App.API.Mux())

	wsCross, wsSame, wsClient, wsRefused, wsDown, wsAttack, wsFull := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	full := make([]pendinguploads.File, 64)
	for i := range full {
		full[i] = pendinguploads.File{Content: []byte("x"), Filename: "filler.txt"}
	}
	if _, err := srv.Store.Stage(context.Background(), auth.AdminIdentity(), wsFull, full); err != nil {
		t.Fatal(err)
	}
	planted, err := srv.Store.Stage(context.Background(), auth.AdminIdentity(), wsAttack,
		[]pendinguploads.File{{Content: []byte("the victim's file"), Filename: "victim.txt", Mimetype: "text/plain"}})
	if err != nil {
		t.Fatal(err)
	}
	files := []fileSpec{
		{Name: "notes.txt", Size: smallFileBytes, Seed: 11, Type: "text/plain"},
		{Name: "scan.pdf", Size: 300 << 10, Seed: 12, Type: "application/pdf"},
	}
	cookie := func(v string) []map[string]string {
		return []map[string]string{{"name": cptest.CookieName, "value": v, "url": cross.URL}}
	}
	args := func(api string, ws uuid.UUID) map[string]any {
		return map[string]any{"api": api, "ws": ws.String(), "slug": tenantSlug, "files": files}
	}
	start := time.Now()
	res := driveSteps(t, node, chromium, []step{
		{Name: "cross", Page: cross.URL + "/index.html", Fn: "uploadAndOpen", Args: args(api.URL, wsCross), Cookies: cookie(member)},
		{Name: "same", Page: same.URL + "/index.html", Fn: "uploadAndOpen", Args: args("", wsSame), Cookies: cookie(member)},
		{Name: "client", Page: cross.URL + "/index.html", Fn: "viaClient", Args: args(api.URL, wsClient), Cookies: cookie(member)},
		{Name: "refused", Page: cross.URL + "/index.html", Fn: "uploadAndOpen", Args: args(api.URL, wsRefused), Cookies: cookie("forged-session")},
		{Name: "down", Page: cross.URL + "/index.html", Fn: "uploadAndOpen", Args: args(api.URL, wsDown), Cookies: cookie(cptest.Broken)},
		{Name: "full", Page: cross.URL + "/index.html", Fn: "viaClient", Args: args(api.URL, wsFull), Cookies: cookie(member)},
		{Name: "attacks", Page: foreign.URL + "/index.html", Fn: "attacks", Args: map[string]any{
			"api": api.URL, "ws": wsAttack.String(), "fileId": planted[0].FileID.String()}, Cookies: cookie(member)},
	})
	var got struct {
		Cross, Same, Client, Refused, Down, Full canvasResult
		Attacks                                  attackResult
	}
	decodeSteps(t, res, &got)

	for name, r := range map[string]struct {
		res canvasResult
		ws  uuid.UUID
	}{"CrossOrigin": {got.Cross, wsCross}, "SameOriginThroughTheEdge": {got.Same, wsSame}} {
		t.Run(name, func(t *testing.T) {
			if !r.res.OK || r.res.Status != http.StatusOK || len(r.res.Staged) != len(files) || len(r.res.Downloads) != len(files) {
				t.Fatalf("the canvas's upload: %+v", r.res)
			}
			for i, f := range files {
				d := r.res.Downloads[i]
				if d.Status != http.StatusOK || d.Size != int64(f.Size) || d.Type != f.Type || d.SHA256 != sha256Hex(pattern(f.Size, f.Seed)) {
					t.Errorf("attachment %d re-opened: %+v, want %d bytes of %s", i, d, f.Size, f.Type)
				}
			}
			if u, a := rowsOf(t, srv, r.ws); u != len(files) || a != len(files) {
				t.Errorf("rows: %d uploads, %d activity rows; want %d and %d", u, a, len(files), len(files))
			}
		})
	}
	t.Run("SameOriginDownloadsCarryNoOrigin", func(t *testing.T) {
		n := 0
		for _, s := range rec.all() {
			if s.method == "GET" && strings.HasPrefix(s.path, "/workspaces/"+wsSame.String()+"/") {
				n++
				if s.origin != "" || s.fetchSite != "same-origin" || s.status != http.StatusOK {
					t.Errorf("same-origin download: Origin %q, Sec-Fetch-Site %q, status %d; want none, same-origin, 200", s.origin, s.fetchSite, s.status)
				}
			}
		}
		if n != len(files) {
			t.Errorf("same-origin downloads seen: %d, want %d", n, len(files))
		}
	})
	t.Run("ClientModuleInSessionMode", func(t *testing.T) {
		c := got.Client
		if !c.OK || len(c.Staged) != len(files) || c.Downloaded.SHA256 != sha256Hex(pattern(files[0].Size, files[0].Seed)) {
			t.Fatalf("uploadFiles and downloadFile with no token: %+v", c)
		}
	})
	t.Run("QuotaRefusal", func(t *testing.T) {
		if f := got.Full; f.OK || f.Status != http.StatusConflict || f.Code != "quota_exceeded" || !strings.Contains(f.Error, "64 files waiting") {
			t.Errorf("an upload to a full workspace through the client module: %+v, want code quota_exceeded", f)
		}
	})
	t.Run("ControlPlaneAskedOnce", func(t *testing.T) {
		if d := time.Since(start); d > 25*time.Second {
			t.Skipf("the run took %v, longer than a member's verdict is kept", d)
		}
		if n := cp.CallsFor(member); n != 1 {
			t.Errorf("control plane asked %d times about the canvas's cookie, want once", n)
		}
	})
	t.Run("RefusedCookie", func(t *testing.T) {
		if r := got.Refused; r.OK || r.Status != http.StatusUnauthorized || !strings.Contains(r.Body, "invalid workspace auth token") {
			t.Errorf("a cookie the control plane refuses: %+v, want a 401 the page can read", r)
		}
		if u, a := rowsOf(t, srv, wsRefused); u != 0 || a != 0 {
			t.Errorf("rows: %d, %d; want none", u, a)
		}
	})
	t.Run("ControlPlaneDown", func(t *testing.T) {
		if r := got.Down; r.OK || r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Body, "retry shortly") {
			t.Errorf("the control plane failing: %+v, want a 503 the page can read", r)
		}
		if u, a := rowsOf(t, srv, wsDown); u != 0 || a != 0 {
			t.Errorf("rows: %d, %d; want none", u, a)
		}
	})
	t.Run("ForeignOrigin", func(t *testing.T) {
		a := got.Attacks
		if a.Form != "submitted" || a.NoCors != "opaque" || a.Ack != "opaque" || a.Img != "error" {
			t.Errorf("the attacks did not all go out: %+v", a)
		}
		if s, ok := a.Read.(string); !ok || !strings.HasPrefix(s, "TypeError") {
			t.Errorf("a credentialed read from another origin: got %v, want the browser to refuse it (TypeError)", a.Read)
		}
		n := 0
		for _, s := range rec.all() {
			if !strings.HasPrefix(s.path, "/workspaces/"+wsAttack.String()+"/") {
				continue
			}
			n++
			if s.status != http.StatusForbidden {
				t.Errorf("%s %s from Origin %q (Sec-Fetch-Site %q): %d, want 403", s.method, s.path, s.origin, s.fetchSite, s.status)
			}
		}
		if n != 5 {
			t.Errorf("requests from the foreign page that reached the service: %d, want 5 (form, no-cors upload, no-cors ack, read, img)", n)
		}
		if u, a := rowsOf(t, srv, wsAttack); u != 1 || a != 1 {
			t.Errorf("rows: %d uploads, %d activity rows; want only the planted file", u, a)
		}
		var fetched, acked *time.Time
		if err := srv.Pool.QueryRow(context.Background(), `SELECT fetched_at, acked_at FROM pending_uploads WHERE file_id = $1`,
			planted[0].FileID).Scan(&fetched, &acked); err != nil || fetched != nil || acked != nil {
			t.Errorf("the planted file: fetched %v, acked %v (%v); want neither", fetched, acked, err)
		}
	})
}
