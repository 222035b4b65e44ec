package browsertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/cptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/throttle"
)

// openRig is the canvas's page on one origin that also routes the
// service's paths to it (the platform's edge), through a link throttled
// per connection (testkit/throttle), over a service with a bucket on
// moto and a control plane for sessions. It notes every GET of a
// download link that reaches the service, and cuts the first one of a
// file when told.
type openRig struct {
	srv   *apptest.Server
	pages *httptest.Server
	cp    *cptest.Server

	mu    sync.Mutex
	gets  []linkGet
	cutAt map[string]int64 // file ID -> the first GET of its link is cut after this many bytes
	// stallAt: file ID -> a GET of its content route stops moving after
	// this many bytes, its connection held open until the browser drops it.
	stallAt map[string]int64
	// headersAt: file ID -> fields that replace those of its content
	// route's answers ("" removes one): a digest altered, or an older
	// server's.
	headersAt map[string]map[string]string
}

// linkGet is one GET of a download link as it reached the service.
type linkGet struct {
	file, rangeHeader, ifRange string
	authorization              bool
}

type cutKey struct{}

type stallKey struct{}

type headersKey struct{}

func startOpenRig(t *testing.T, rate int64) *openRig {
	t.Helper()
	rig := &openRig{cutAt: map[string]int64{}, stallAt: map[string]int64{}, headersAt: map[string]map[string]string{}}
	var proxy atomic.Pointer[httputil.ReverseProxy]
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(filepath.Join("testdata", "canvas"))))
	mux.Handle("/page/", http.StripPrefix("/page/", http.FileServer(http.Dir(filepath.Join("testdata", "page")))))
	serveClient(t, mux, "/page/")
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rig.serveAPI(w, r, proxy.Load()) })
	mux.Handle("/workspaces/", api)
	mux.Handle("/uploads/", api)
	rig.pages = httptest.NewServer(mux)
	t.Cleanup(rig.pages.Close)

	rig.cp = cptest.Start(t, tenantSlug)
	env := rig.cp.Env()
	env["PUBLIC_ORIGIN"] = rig.pages.URL
	env["MAX_FILE_BYTES"] = "104857600"
	rig.srv = apptest.NewServer(t, apptest.Options{S3: true, Env: env})
	u, err := url.Parse(rig.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: throttle.Start(t, u.Host, rate).Addr})
	rp.ErrorLog = log.New(io.Discard, "", 0) // the cut is on purpose
	rp.ModifyResponse = func(resp *http.Response) error {
		if n, ok := resp.Request.Context().Value(cutKey{}).(int64); ok && resp.StatusCode == http.StatusOK {
			resp.Body = &cutBody{ReadCloser: resp.Body, left: n}
		}
		if n, ok := resp.Request.Context().Value(stallKey{}).(int64); ok && resp.StatusCode == http.StatusOK {
			resp.Body = &cutBody{ReadCloser: resp.Body, left: n, hold: resp.Request.Context()}
		}
		if h, ok := resp.Request.Context().Value(headersKey{}).(map[string]string); ok {
			for k, v := range h {
				if v == "" {
					resp.Header.Del(k)
				} else {
					resp.Header.Set(k, v)
				}
			}
		}
		return nil
	}
	proxy.Store(rp)
	return rig
}

// serveAPI forwards r to the service, noting (and cutting, once) a GET
// of a download link.
func (rig *openRig) serveAPI(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy) {
	if r.Method == http.MethodGet && path.Base(r.URL.Path) == "download" {
		file := path.Base(path.Dir(r.URL.Path))
		rig.mu.Lock()
		rig.gets = append(rig.gets, linkGet{file, r.Header.Get("Range"), r.Header.Get("If-Range"), r.Header.Get("Authorization") != ""})
		n, cut := rig.cutAt[file]
		delete(rig.cutAt, file)
		rig.mu.Unlock()
		if cut {
			r = r.WithContext(context.WithValue(r.Context(), cutKey{}, n))
		}
	}
	if r.Method == http.MethodGet && path.Base(r.URL.Path) == "content" {
		rig.mu.Lock()
		n, stall := rig.stallAt[path.Base(path.Dir(r.URL.Path))]
		h, edit := rig.headersAt[path.Base(path.Dir(r.URL.Path))]
		rig.mu.Unlock()
		if stall {
			r = r.WithContext(context.WithValue(r.Context(), stallKey{}, n))
		}
		if edit {
			r = r.WithContext(context.WithValue(r.Context(), headersKey{}, h))
		}
	}
	rp.ServeHTTP(w, r)
}

func (rig *openRig) getsOf(file string) []linkGet {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	var out []linkGet
	for _, g := range rig.gets {
		if g.file == file {
			out = append(out, g)
		}
	}
	return out
}

// cutBody ends a response's body with an error after left bytes: the
// proxy aborts the answer, and the browser sees its connection cut. With
// hold, it first waits, no byte moving, until hold is done (the browser
// gave the request up).
type cutBody struct {
	io.ReadCloser
	left int64
	hold context.Context
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		if c.hold != nil {
			<-c.hold.Done()
		}
		return 0, errors.New("cut on purpose")
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	return n, err
}

// stageFile stages data for ws as the platform does, through the store.
func (rig *openRig) stageFile(t *testing.T, ws uuid.UUID, name string, data []byte) string {
	t.Helper()
	recs, err := rig.srv.Store.Stage(context.Background(), auth.AdminIdentity(), ws,
		[]pendinguploads.File{{Content: data, Filename: name, Mimetype: "application/octet-stream"}})
	if err != nil {
		t.Fatal(err)
	}
	return recs[0].FileID.String()
}

// openStep is one step of download.mjs.
type openStep struct {
	Name      string `json:"name"`
	Fn        string `json:"fn"`
	Args      any    `json:"args"`
	Download  bool   `json:"download"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// openResult is what download.mjs says of one step.
type openResult struct {
	Result struct {
		OK    bool `json:"ok"`
		Error any  `json:"error"`
	} `json:"result"`
	Raw      json.RawMessage `json:"-"` // the page's answer as it came
	Download *struct {
		GUID     string   `json:"guid"`
		URL      string   `json:"url"`
		Name     string   `json:"name"`
		State    string   `json:"state"`
		States   []string `json:"states"`
		Received int64    `json:"received"`
		Total    int64    `json:"total"`
	} `json:"download"`
	Heap struct{ Before, Max, After float64 } `json:"heap"`
	RSS  struct{ Before, Max, After float64 } `json:"rss"`
	MS   int64                                `json:"ms"`
}

// driveDownloads runs testdata/download.mjs on the rig's open.html with
// cookies (nil: none) and returns its results, by step, and the folder
// Chromium saved the downloads into.
func (rig *openRig) driveDownloads(t *testing.T, node, chromium string, cookies any, steps []openStep, timeout time.Duration) (map[string]openResult, string) {
	t.Helper()
	dir := t.TempDir()
	stdout := runScript(t, node, "download.mjs", map[string]any{"chromium": chromium, "page": rig.pages.URL + "/open.html", "dir": dir, "cookies": cookies, "steps": steps}, timeout)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(stdout, &raw); err != nil {
		t.Fatalf("download.mjs output: %v\n%s", err, stdout)
	}
	out := map[string]openResult{}
	for k, v := range raw {
		if k == "userAgent" {
			t.Logf("browser: %s", v)
			continue
		}
		var r openResult
		if err := json.Unmarshal(v, &r); err != nil {
			t.Fatalf("step %s: %v", k, err)
		}
		var page struct {
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(v, &page)
		r.Raw = page.Result
		out[k] = r
	}
	return out, dir
}

// mustRemarshal decodes raw into v.
func mustRemarshal(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

// wantSaved checks that step r downloaded want through the browser's
// download manager: completed, every byte, the file on disk byte-exact,
// and the page's JS heap not grown by the file's size.
func wantSaved(t *testing.T, name string, r openResult, dir string, want []byte) {
	t.Helper()
	if !r.Result.OK || r.Download == nil {
		t.Fatalf("%s: the page answered %+v, download %+v; want a download begun", name, r.Result, r.Download)
	}
	d := r.Download
	if d.State != "completed" || d.Received != int64(len(want)) {
		t.Fatalf("%s: download %s (states %v), %d of %d bytes; want completed, %d", name, d.State, d.States, d.Received, d.Total, len(want))
	}
	got, err := os.ReadFile(filepath.Join(dir, d.GUID))
	if err != nil {
		t.Fatalf("%s: the saved file: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: the saved file has %d bytes (sha256 %s), want %d (%s)", name, len(got), sha256Hex(got), len(want), sha256Hex(want))
	}
	// Above a floor of 1 MiB (the page's own allocations while it waits).
	if grew := r.Heap.Max - r.Heap.Before; grew > max(float64(len(want))/2, 1<<20) {
		t.Errorf("%s: the page's JS heap grew by %.0f bytes for a file of %d: the bytes went through the page", name, grew, len(want))
	}
	t.Logf("%s: %d bytes in %s (states %v); JS heap %.1f MiB before, %.1f MiB at most, %.1f MiB after; renderers' RSS %.1f MiB before, %.1f MiB at most",
		name, len(want), time.Duration(r.MS)*time.Millisecond, d.States, r.Heap.Before/(1<<20), r.Heap.Max/(1<<20), r.Heap.After/(1<<20),
		r.RSS.Before/(1<<20), r.RSS.Max/(1<<20))
}

// TestCanvasOpensAttachments plays the canvas's downloadChatFile with
// README's drop-in, in Chromium (testdata/canvas/open.js), on the
// canvas's origin with the service's paths routed there, through a link
// of 4 MiB/s: in session mode (the cookie, the tenant header, no bearer)
// and in bearer mode (local development). Each platform-pending:
// attachment is asked a link with the canvas's headers and credentials
// and handed to the browser's download manager (CDP download events):
// the file lands on disk byte-exact, its bytes never through the page's
// JS heap, and the link's GET carries no Authorization. A download cut
// after 3 MiB is resumed by the browser itself, with Range and If-Range,
// and lands whole. A file swept since is the client's error, no
// download.
func TestCanvasOpensAttachments(t *testing.T) {
	chromium, node := requireBrowser(t)
	rig := startOpenRig(t, 4<<20)
	const member = "open-session-0123456789"
	rig.cp.AddMember(member, "user-open")
	ws := uuid.New()
	large, small := pattern(8<<20, 11), pattern(10<<10, 12)
	largeID, smallID := rig.stageFile(t, ws, "scan.bin", large), rig.stageFile(t, ws, "note.bin", small)
	cutID := rig.stageFile(t, ws, "cut.bin", large)
	goneID := rig.stageFile(t, ws, "gone.bin", small)
	if _, err := rig.srv.Pool.Exec(context.Background(), `DELETE FROM pending_uploads WHERE file_id = $1`, goneID); err != nil {
		t.Fatal(err)
	}
	stallID := rig.stageFile(t, ws, "stall.bin", large)
	rig.mu.Lock()
	rig.cutAt[cutID] = 3 << 20
	rig.stallAt[stallID] = 1 << 20
	rig.mu.Unlock()
	att := func(id, name string) map[string]any {
		return map[string]any{"uri": "platform-pending:" + ws.String() + "/" + id, "name": name}
	}

	t.Run("Session", func(t *testing.T) {
		cookies := []map[string]string{{"name": cptest.CookieName, "value": member, "url": rig.pages.URL}}
		args := func(id, name string) map[string]any {
			return map[string]any{"api": "", "slug": tenantSlug, "ws": ws.String(), "attachment": att(id, name)}
		}
		res, dir := rig.driveDownloads(t, node, chromium, cookies, []openStep{
			{Name: "large", Fn: "open", Args: args(largeID, "scan.bin"), Download: true, TimeoutMs: 60_000},
			{Name: "small", Fn: "open", Args: args(smallID, "note.bin"), Download: true, TimeoutMs: 30_000},
			{Name: "gone", Fn: "open", Args: args(goneID, "gone.bin")},
			{Name: "inThePage", Fn: "readWhole", Args: map[string]any{"api": "", "slug": tenantSlug, "ws": ws.String(), "fileId": smallID}},
			{Name: "stalled", Fn: "readWhole", Args: map[string]any{"api": "", "slug": tenantSlug, "ws": ws.String(), "fileId": stallID, "stallTimeoutMs": 1500}},
		}, 3*time.Minute)
		wantSaved(t, "large", res["large"], dir, large)
		wantSaved(t, "small", res["small"], dir, small)
		if name := res["large"].Download.Name; name != "scan.bin" {
			t.Errorf("the browser's name for it: got %q, want scan.bin (Content-Disposition)", name)
		}
		var whole, stalled struct {
			OK    bool
			Size  int
			Error struct{ Name, Code string }
		}
		mustRemarshal(t, res["inThePage"].Raw, &whole)
		mustRemarshal(t, res["stalled"].Raw, &stalled)
		if !whole.OK || whole.Size != len(small) {
			t.Errorf("downloadFile: got %+v, want the %d bytes", whole, len(small))
		}
		// downloadFile gives a transfer that stopped moving up as an
		// upload is given up: a TimeoutError, code timeout.
		if stalled.OK || stalled.Error.Name != "TimeoutError" || stalled.Error.Code != "timeout" {
			t.Errorf("downloadFile of a transfer stalled after 1 MiB: got %+v, want a TimeoutError (code timeout)", stalled)
		}
		if g := res["gone"]; g.Result.OK || g.Download != nil {
			t.Errorf("a swept file: got %+v, download %+v; want the client's error and no download", g.Result, g.Download)
		}
		for _, g := range append(rig.getsOf(largeID), rig.getsOf(smallID)...) {
			if g.authorization {
				t.Errorf("the link's GET of %s carried Authorization", g.file)
			}
		}
	})

	t.Run("BearerWithACut", func(t *testing.T) {
		token := rig.srv.WorkspaceToken(t, ws)
		res, dir := rig.driveDownloads(t, node, chromium, nil, []openStep{
			{Name: "cut", Fn: "open", Args: map[string]any{"api": "", "token": token, "ws": ws.String(), "attachment": att(cutID, "cut.bin")},
				Download: true, TimeoutMs: 90_000},
		}, 3*time.Minute)
		wantSaved(t, "cut", res["cut"], dir, large)
		gets := rig.getsOf(cutID)
		resumed := false
		for _, g := range gets[1:] {
			if strings.HasPrefix(g.rangeHeader, "bytes=") && !strings.HasPrefix(g.rangeHeader, "bytes=0-") &&
				g.ifRange == `"`+sha256Hex(large)+`"` {
				resumed = true
			}
		}
		if len(gets) < 2 || !resumed {
			t.Errorf("the link's GETs after a cut at 3 MiB: %+v; want the browser to resume with Range and If-Range", gets)
		}
		t.Logf("the link's GETs: %+v", gets)
	})
}

// TestCanvasOpensA100MiBAttachment measures the case the canvas could
// not open: a 100 MiB attachment over a link of 1.5 MiB/s, about 67 s,
// past the canvas's fixed minute. Through the drop-in (session mode) the
// browser's download manager saves it byte-exact, the page's JS heap and
// the renderers' memory untouched by its size; the canvas's own fetch and
// blob, the comparison, gives up at its minute. Over two minutes, so it
// runs only with PENDINGUPLOADS_MEASURE=1, not in make test
// (TestCanvasOpensAttachments is the always-on version).
func TestCanvasOpensA100MiBAttachment(t *testing.T) {
	if os.Getenv("PENDINGUPLOADS_MEASURE") != "1" {
		t.Skip("a measurement: PENDINGUPLOADS_MEASURE=1 runs it")
	}
	chromium, node := requireBrowser(t)
	const rate = 3 << 19 // 1.5 MiB/s
	rig := startOpenRig(t, rate)
	const member = "open-session-0123456789"
	rig.cp.AddMember(member, "user-open")
	ws := uuid.New()
	data := pattern(maxUploadBytes, 13)
	id := rig.stageFile(t, ws, "video.bin", data)
	cookies := []map[string]string{{"name": cptest.CookieName, "value": member, "url": rig.pages.URL}}
	res, dir := rig.driveDownloads(t, node, chromium, cookies, []openStep{
		{Name: "dropin", Fn: "open", Download: true, TimeoutMs: 180_000, Args: map[string]any{"api": "", "slug": tenantSlug, "ws": ws.String(),
			"attachment": map[string]any{"uri": "platform-pending:" + ws.String() + "/" + id, "name": "video.bin"}}},
		{Name: "legacy", Fn: "legacy", Args: map[string]any{"api": "", "slug": tenantSlug, "ws": ws.String(), "fileId": id, "name": "video.bin"}},
	}, 8*time.Minute)
	r := res["dropin"]
	wantSaved(t, "dropin", r, dir, data)
	if r.MS < 60_000 {
		t.Logf("the download took %d ms: under the minute the case is about (a faster machine or link)", r.MS)
	}
	if grew := r.RSS.Max - r.RSS.Before; grew > float64(len(data))/2 {
		t.Errorf("the renderers' memory grew by %.0f bytes for a file of %d", grew, len(data))
	}
	l := res["legacy"]
	t.Logf("the canvas's own fetch and blob: %+v after %s; JS heap %.1f MiB at most; renderers' RSS %.1f MiB before, %.1f MiB at most",
		l.Result, time.Duration(l.MS)*time.Millisecond, l.Heap.Max/(1<<20), l.RSS.Before/(1<<20), l.RSS.Max/(1<<20))
}

// TestDownloadFileChecksReprDigest: the client's downloadFile, in
// Chromium, checks the bytes against the answer's Repr-Digest (the whole
// file's), and against Content-Digest only on a 200 without it (a server
// before Repr-Digest): the service's answer as served passes, as does an
// older server's; a Repr-Digest altered (Content-Digest left as served)
// and an older server's Content-Digest altered are digest_mismatch.
func TestDownloadFileChecksReprDigest(t *testing.T) {
	chromium, node := requireBrowser(t)
	rig := startOpenRig(t, 64<<20)
	ws := uuid.New()
	token := rig.srv.WorkspaceToken(t, ws)
	data := pattern(40<<10, 31)
	wrong := "sha-256=:" + strings.Repeat("A", 43) + "=:"
	sum := sha256.Sum256(data)
	whole := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
	cases := []struct {
		name    string
		headers map[string]string
		ok      bool
	}{
		{"asServed", nil, true},
		{"olderServer", map[string]string{"Repr-Digest": "", "Content-Digest": whole}, true},
		{"reprAltered", map[string]string{"Repr-Digest": wrong}, false},
		{"olderServerAltered", map[string]string{"Repr-Digest": "", "Content-Digest": wrong}, false},
	}
	var steps []openStep
	for _, tc := range cases {
		id := rig.stageFile(t, ws, tc.name+".bin", data)
		if tc.headers != nil {
			rig.mu.Lock()
			rig.headersAt[id] = tc.headers
			rig.mu.Unlock()
		}
		steps = append(steps, openStep{Name: tc.name, Fn: "readWhole", Args: map[string]any{"api": "", "token": token, "ws": ws.String(), "fileId": id}})
	}
	res, _ := rig.driveDownloads(t, node, chromium, nil, steps, 2*time.Minute)
	for _, tc := range cases {
		var got struct {
			OK     bool
			Size   int
			SHA256 string
			Error  struct{ Name, Code, Message string }
		}
		mustRemarshal(t, res[tc.name].Raw, &got)
		switch {
		case tc.ok && (!got.OK || got.Size != len(data) || got.SHA256 != sha256Hex(data)):
			t.Errorf("%s: got %+v, want the %d bytes", tc.name, got, len(data))
		case !tc.ok && (got.OK || got.Error.Code != "digest_mismatch"):
			t.Errorf("%s: got %+v, want digest_mismatch", tc.name, got)
		}
	}
}
