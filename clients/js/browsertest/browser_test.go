package browsertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/inbox"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

const (
	// largeFileBytes is the file that must take presign: 30 MiB, over the
	// default 25 MiB cap (the test server sets MAX_FILE_BYTES to 100 MiB),
	// and over the default multipart threshold (16 MiB): it goes in parts.
	largeFileBytes = 30 << 20
	// mediumFileBytes fits one multipart request (4 MiB) on its own.
	mediumFileBytes = 3 << 20
	smallFileBytes  = 1 << 10
	// browserPutRate slows the browser's PUTs to the bucket (bytes per
	// second), so that a PUT lasts long enough to be aborted half way.
	browserPutRate = 32 << 20
	// fiveMiB is over the 4 MiB a request may carry: the case that got 413
	// before this client.
	fiveMiB = 5 << 20
	// commitAnswerLost: true, the first commit of the retry case is
	// committed and its answer lost (a 502): the client's retry relies on
	// a repeated commit answering 200 with the same files (the contract).
	// false would refuse it with a 503 before it reaches the service.
	commitAnswerLost = true
	// driveTimeout bounds the whole browser run.
	driveTimeout = 2 * time.Minute
)

func TestMain(m *testing.M) { testkit.Main(m) }

// pattern is harness.js's pattern: xorshift32 from seed, each word
// little-endian.
func pattern(size int, seed uint32) []byte {
	out := make([]byte, size+3)
	x := seed
	if x == 0 {
		x = 1
	}
	for i := 0; i < size; i += 4 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		binary.LittleEndian.PutUint32(out[i:], x)
	}
	return out[:size]
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// requireBrowser returns Chromium's and node's paths, or skips (fails
// with CI=true) in one line naming what is missing.
func requireBrowser(t *testing.T) (chromium, node string) {
	t.Helper()
	chromium = "/usr/bin/chromium"
	var missing []string
	if fi, err := os.Stat(chromium); err != nil || fi.IsDir() {
		missing = append(missing, chromium)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	if _, err := os.Stat(filepath.Join("..", "node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "clients/js/node_modules/playwright-core (npm ci)")
	}
	if len(missing) > 0 {
		msg := "browser test: cannot run, missing " + strings.Join(missing, ", ") + " (scripts/ensure-tools.sh installs them)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return chromium, node
}

// serveClient serves the client's modules (the files directly in
// clients/js ending in .js, as the dev server serves them) under prefix,
// each beside pendinguploads.js, so that its relative imports resolve.
func serveClient(t *testing.T, mux *http.ServeMux, prefix string) {
	t.Helper()
	modules, err := filepath.Glob(filepath.Join("..", "*.js"))
	if err != nil || len(modules) == 0 {
		t.Fatalf("the client's modules in ..: %v %v", modules, err)
	}
	for _, path := range modules {
		mux.HandleFunc(prefix+filepath.Base(path), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			http.ServeFile(w, r, path)
		})
	}
}

// pageServer serves the test page and the client's modules on a loopback
// origin of its own.
func pageServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(filepath.Join("testdata", "page"))))
	serveClient(t, mux, "/")
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// throttledBody yields its reader's bytes at no more than rate bytes per
// second.
type throttledBody struct {
	io.ReadCloser
	rate  int64
	start time.Time
	n     int64
}

func (b *throttledBody) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	k, err := b.ReadCloser.Read(p)
	b.n += int64(k)
	if due := b.start.Add(time.Duration(b.n * int64(time.Second) / b.rate)); time.Until(due) > 0 {
		time.Sleep(time.Until(due))
	}
	return k, err
}

// bucketProxy stands between everyone and moto: the app presigns for it,
// so the browser PUTs through it, and those PUTs (the requests with an
// Origin) are slowed to browserPutRate, like a real uplink. It counts
// them.
// The first browser PUT to staging/<failFirstPut>/ is answered 503
// without reaching moto.
func bucketProxy(t *testing.T, moto string, browserPuts *atomic.Int64, failFirstPut uuid.UUID, failedPuts *atomic.Int64) string {
	t.Helper()
	u, err := url.Parse(moto)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	// An aborted PUT is an expected proxy error; keep it out of the output.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.Header.Get("Origin") != "" {
			browserPuts.Add(1)
			if strings.Contains(r.URL.Path, "/staging/"+failFirstPut.String()+"/") && failedPuts.Add(1) == 1 {
				w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
				http.Error(w, "<Error><Code>SlowDown</Code></Error>", http.StatusServiceUnavailable)
				return
			}
			r.Body = &throttledBody{ReadCloser: r.Body, rate: browserPutRate, start: time.Now()}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// faults stands in for failures on the way to the service: the first
// commit for retryWS fails (see commitAnswerLost), every multipart upload
// for onceWS is stored by the service and its answer lost (a 502), and
// the answers of uploads for tamperWS carry another sha256.
func faults(allowed string, retryWS uuid.UUID, commits *atomic.Int64, onceWS uuid.UUID, posts *atomic.Int64, tamperWS uuid.UUID, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		lost := func() {
			next.ServeHTTP(httptest.NewRecorder(), r)
			fabricated(w, r, allowed)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `{"message":"Internal server error"}`)
		}
		switch r.URL.Path {
		case "/workspaces/" + retryWS.String() + "/chat/uploads":
			if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") && commits.Add(1) == 1 {
				if commitAnswerLost {
					lost()
					return
				}
				fabricated(w, r, allowed)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":"storage unavailable, retry shortly","code":"unavailable"}`)
				return
			}
		case "/workspaces/" + onceWS.String() + "/chat/uploads":
			posts.Add(1)
			lost()
			return
		case "/workspaces/" + tamperWS.String() + "/chat/uploads":
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var v struct {
				Files []map[string]any `json:"files"`
			}
			if rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), &v) == nil {
				for _, f := range v.Files {
					f["sha256"] = strings.Repeat("0", 64)
				}
				b, _ := json.Marshal(v)
				rec.Body = bytes.NewBuffer(b)
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fabricated gives an answer the test makes up (not the service's) the
// CORS headers the service puts on every answer to an allowed origin, so
// that the page can read it as it reads the service's own.
func fabricated(w http.ResponseWriter, r *http.Request, allowed string) {
	if r.Header.Get("Origin") == allowed {
		w.Header().Set("Access-Control-Allow-Origin", allowed)
		w.Header().Set("Access-Control-Expose-Headers", "Content-Disposition, Content-Digest, Repr-Digest, Content-Range, Retry-After")
	}
}

type step struct {
	Name string `json:"name"`
	Page string `json:"page"`
	Fn   string `json:"fn"`
	Args any    `json:"args"`
	// Cookies, when set, are the browser's only cookies for the step:
	// [{name, value, url}].
	Cookies any `json:"cookies,omitempty"`
	// Reload, when set, reloads the step's page once Fn resolved (cutting
	// what it still has in flight) and calls Reload.Fn there.
	Reload *reloadStep `json:"reload,omitempty"`
}

// reloadStep is what a step calls on its page after reloading it; its
// result is under Name.
type reloadStep struct {
	Name string `json:"name"`
	Fn   string `json:"fn"`
	Args any    `json:"args"`
}

type fileSpec struct {
	Name string `json:"name"`
	Size int    `json:"size"`
	Seed uint32 `json:"seed"`
	Type string `json:"type"`
	// LastModified (ms since the epoch), when set, is the File's: the
	// same file in every step.
	LastModified int64 `json:"lastModified,omitempty"`
	// Zeros makes Size zero bytes, cheaply, instead of the pattern.
	Zeros bool `json:"zeros,omitempty"`
}

type jsError struct {
	Name                string              `json:"name"`
	IsPendingUploadsErr bool                `json:"isPendingUploadsError"`
	Code                string              `json:"code"`
	Status              int                 `json:"status"`
	Message             string              `json:"message"`
	Staged              []client.StagedFile `json:"staged"`
	// Body is the error's body: the service's JSON error answer, if any.
	Body map[string]any `json:"body"`
	// RetryAfterMs is the service's Retry-After the error carries (nil:
	// none).
	RetryAfterMs *float64 `json:"retryAfterMs"`
}

type uploadResult struct {
	OK       bool                                `json:"ok"`
	Error    *jsError                            `json:"error"`
	IsSecure bool                                `json:"isSecureContext"`
	Subtle   bool                                `json:"subtle"`
	Result   struct{ Files []client.StagedFile } `json:"result"`
	Progress struct {
		Count      int                            `json:"count"`
		Backwards  bool                           `json:"backwards"`
		First      *struct{ Loaded, Total int64 } `json:"first"`
		Last       *struct{ Loaded, Total int64 } `json:"last"`
		FileLoaded map[string]int64               `json:"fileLoaded"`
	} `json:"progress"`
	// ResumeEntries is how many uploads of the call's workspace the
	// page's localStorage remembers for a resume, after the call (the
	// steps of a test share the browser's profile).
	ResumeEntries int `json:"resumeEntries"`
	Downloads     []struct {
		Index    int      `json:"index"`
		Name     string   `json:"name"`
		MimeType string   `json:"mimeType"`
		Size     int64    `json:"size"`
		SHA256   string   `json:"sha256"`
		Same     bool     `json:"same"`
		Error    *jsError `json:"error"`
	} `json:"downloads"`
}

type abortResult struct {
	OK            bool     `json:"ok"`
	Error         *jsError `json:"error"`
	AbortedAt     int64    `json:"abortedAt"`
	Total         int64    `json:"total"`
	ResumeEntries int      `json:"resumeEntries"`
}

type refusedResult struct {
	Client struct {
		OK    bool
		Error *jsError
	} `json:"client"`
	ClientWithLimits struct {
		OK    bool
		Error *jsError
	} `json:"clientWithLimits"`
	Fetch struct {
		OK     bool
		Status int
		Error  *struct{ Name, Message string }
	} `json:"fetch"`
}

type driveResults struct {
	Upload    uploadResult  `json:"upload"`
	Retry     uploadResult  `json:"retry"`
	NoRetry   uploadResult  `json:"noRetry"`
	Tampered  uploadResult  `json:"tampered"`
	Abort     abortResult   `json:"abort"`
	Refused   refusedResult `json:"refused"`
	UserAgent string        `json:"userAgent"`
}

// drive runs testdata/drive.mjs (driveSteps) and decodes the results.
func drive(t *testing.T, node, chromium string, steps []step) driveResults {
	t.Helper()
	var res driveResults
	decodeSteps(t, driveSteps(t, node, chromium, steps), &res)
	t.Logf("browser: %s", res.UserAgent)
	return res
}

// driveSteps runs testdata/drive.mjs: Chromium opens each step's page and
// calls the harness; the results come back as one JSON object, by step.
func driveSteps(t *testing.T, node, chromium string, steps []step) []byte {
	t.Helper()
	start := time.Now()
	out := runScript(t, node, "drive.mjs", map[string]any{"chromium": chromium, "steps": steps}, driveTimeout)
	t.Logf("browser run: %d steps in %s", len(steps), time.Since(start).Round(time.Millisecond))
	return out
}

// runScript runs testdata/script in node with cfg as its one argument
// (JSON), within timeout, and returns what it printed; its stderr goes to
// the test's log, and a failure (or a run past timeout) fails the test.
// SIGTERM lets the script close Chromium; a hung one is killed.
func runScript(t *testing.T, node, script string, cfg any, timeout time.Duration) []byte {
	t.Helper()
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", script), string(arg))
	cmd.Env = append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("%s stderr:\n%s", script, stderr.Bytes())
	}
	if err != nil {
		t.Fatalf("%s: %v (after %s)", script, err, time.Since(start).Round(time.Millisecond))
	}
	return stdout.Bytes()
}

// decodeSteps decodes driveSteps' output into v.
func decodeSteps(t *testing.T, out []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("drive.mjs output: %v\n%s", err, out)
	}
}

func count(t *testing.T, srv *apptest.Server, query string, ws uuid.UUID) int {
	t.Helper()
	var n int
	if err := srv.Pool.QueryRow(context.Background(), query, ws).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func rowsOf(t *testing.T, srv *apptest.Server, ws uuid.UUID) (uploads, activity int) {
	t.Helper()
	return count(t, srv, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws),
		count(t, srv, `SELECT count(*) FROM activity_logs WHERE workspace_id = $1 OR target_id = $1`, ws)
}

func objectsUnder(t *testing.T, c *s3.Client, bucket, prefix string) []types.Object {
	t.Helper()
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatalf("list %s: %v", prefix, err)
	}
	return out.Contents
}

// TestBrowserClient runs the client module in Chromium against the whole
// service: a page on an allowed origin stages a small, a medium and a
// large file (the large one through presign and its parts' PUTs to the
// bucket), and the workspace pulls them byte-exact; an abort in the
// middle of a PUT (a caller that takes no parts) stores nothing; a failed
// PUT and commit are retried, a multipart POST whose answer was lost is
// not; an answer with another digest is an error; a page on an origin the
// service does not allow is refused by the browser, and nothing is
// stored. One Chromium run does every step. TestBrowserClientInParts
// covers the parts: resume, abort, the resume store.
func TestBrowserClient(t *testing.T) {
	chromium, node := requireBrowser(t)

	allowed, denied := pageServer(t), pageServer(t)
	moto := s3test.MustStart(t)
	wsMain, wsAbort, wsDenied, wsRetry, wsNoRetry, wsTamper := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	var browserPuts, retryPuts atomic.Int64
	bucketURL := bucketProxy(t, moto.URL, &browserPuts, wsRetry, &retryPuts)
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"S3_ENDPOINT":          bucketURL,
		"CORS_ALLOWED_ORIGINS": allowed.URL,
		"MAX_FILE_BYTES":       "104857600",
	}})
	// The bucket's CORS rule, as template.yaml writes it.
	s3c := s3test.NewClient(srv.S3)
	if _, err := s3c.PutBucketCors(context.Background(), &s3.PutBucketCorsInput{
		Bucket: aws.String(srv.Bucket),
		CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{{
			AllowedMethods: []string{"PUT", "GET"}, AllowedOrigins: []string{allowed.URL},
			AllowedHeaders: []string{"*"}, MaxAgeSeconds: aws.Int32(3600),
		}}},
	}); err != nil {
		t.Fatalf("bucket CORS: %v", err)
	}

	// Origin A: the service (its own CORS and limits), and a
	// count of the POSTs that reached it from the denied origin.
	var fromDenied, retryCommits, noRetryPosts atomic.Int64
	inner := faults(allowed.URL, wsRetry, &retryCommits, wsNoRetry, &noRetryPosts, wsTamper,
		srv.App.API.Mux())
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A preflighted request the browser refused never arrives.
		if r.Header.Get("Origin") == denied.URL && r.Method == http.MethodPost {
			fromDenied.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)

	files := []fileSpec{
		{Name: "notes 1k.txt", Size: smallFileBytes, Seed: 1, Type: "text/plain"},
		{Name: "photo.png", Size: mediumFileBytes, Seed: 2, Type: "image/png"},
		{Name: "big archive.bin", Size: largeFileBytes, Seed: 3, Type: "application/octet-stream"},
	}
	abortFile := fileSpec{Name: "aborted.bin", Size: largeFileBytes, Seed: 4, Type: "application/octet-stream"}
	res := drive(t, node, chromium, []step{
		{Name: "upload", Page: allowed.URL + "/index.html", Fn: "upload", Args: map[string]any{
			"api": api.URL, "token": srv.AdminToken, "ws": wsMain.String(), "files": files, "downloadMax": 4 << 20}},
		{Name: "abort", Page: allowed.URL + "/index.html", Fn: "abortMidPut", Args: map[string]any{
			"api": api.URL, "token": srv.AdminToken, "ws": wsAbort.String(), "file": abortFile, "abortAt": 1 << 20, "onePut": true}},
		{Name: "retry", Page: allowed.URL + "/index.html", Fn: "upload", Args: map[string]any{
			"api": api.URL, "token": srv.AdminToken, "ws": wsRetry.String(), "downloadMax": 0,
			"files": []fileSpec{{Name: "five.bin", Size: fiveMiB, Seed: 5}}}},
		{Name: "noRetry", Page: allowed.URL + "/index.html", Fn: "upload", Args: map[string]any{
			"api": api.URL, "token": srv.AdminToken, "ws": wsNoRetry.String(), "downloadMax": 0,
			"files": []fileSpec{{Name: "once.txt", Size: smallFileBytes, Seed: 6, Type: "text/plain"}}}},
		{Name: "tampered", Page: allowed.URL + "/index.html", Fn: "upload", Args: map[string]any{
			"api": api.URL, "token": srv.AdminToken, "ws": wsTamper.String(), "downloadMax": 0,
			"files": []fileSpec{{Name: "checked.txt", Size: smallFileBytes, Seed: 7, Type: "text/plain"}}}},
		{Name: "refused", Page: denied.URL + "/index.html", Fn: "refused", Args: map[string]any{
			"api": api.URL, "token": srv.AdminToken, "ws": wsDenied.String(), "file": files[0]}},
	})

	t.Run("UploadAndPull", func(t *testing.T) {
		up := res.Upload
		if !up.OK {
			t.Fatalf("upload failed in the browser: %+v", up.Error)
		}
		if !up.IsSecure || !up.Subtle {
			t.Errorf("the page is not a secure context with SubtleCrypto (secure %v, subtle %v): the digests went unchecked", up.IsSecure, up.Subtle)
		}
		want := []struct {
			name, mime string
			body       []byte
		}{
			{"notes_1k.txt", "text/plain", pattern(smallFileBytes, 1)},
			{"photo.png", "image/png", pattern(mediumFileBytes, 2)},
			{"big_archive.bin", "application/octet-stream", pattern(largeFileBytes, 3)},
		}
		got := up.Result.Files
		if len(got) != len(want) {
			t.Fatalf("answer: %d files, want %d", len(got), len(want))
		}
		var total int64
		for i, w := range want {
			g := got[i]
			if g.Name != w.name || g.MimeType != w.mime || g.Size != int64(len(w.body)) || g.SHA256 != sha256Hex(w.body) {
				t.Errorf("file %d: got %s %s %d %s, want %s %s %d %s", i, g.Name, g.MimeType, g.Size, g.SHA256, w.name, w.mime, len(w.body), sha256Hex(w.body))
			}
			if g.URI != "platform-pending:"+wsMain.String()+"/"+g.FileID.String() {
				t.Errorf("file %d: uri %s", i, g.URI)
			}
			total += int64(len(w.body))
		}
		// Progress per byte, reaching the total, never going back.
		p := up.Progress
		t.Logf("progress: %d events for %d bytes", p.Count, total)
		if p.Last == nil || p.Last.Loaded != total || p.Last.Total != total || p.Backwards || p.Count < len(want) {
			t.Errorf("progress: %d events, last %+v, backwards %v; want last loaded = total = %d", p.Count, p.Last, p.Backwards, total)
		}
		for i, w := range want {
			if n := p.FileLoaded[strconv.Itoa(i)]; n != int64(len(w.body)) {
				t.Errorf("progress of file %d: %d of %d bytes", i, n, len(w.body))
			}
		}
		if n := browserPuts.Load(); n < 1 {
			t.Errorf("no PUT from the browser reached the bucket: the large file did not take presign")
		}
		if up.ResumeEntries != 0 {
			t.Errorf("resume entries left after the commit: %d", up.ResumeEntries)
		}
		// The two files under 4 MiB, downloaded back in the browser.
		if len(up.Downloads) != 2 {
			t.Errorf("downloads in the browser: %+v", up.Downloads)
		}
		for _, d := range up.Downloads {
			if d.Error != nil || !d.Same || d.Name != want[d.Index].name || d.MimeType != want[d.Index].mime || d.SHA256 != sha256Hex(want[d.Index].body) {
				t.Errorf("download %d in the browser: %+v", d.Index, d)
			}
		}
		if u, a := rowsOf(t, srv, wsMain); u != 3 || a != 3 {
			t.Errorf("rows: %d uploads, %d activity rows; want 3 and 3", u, a)
		}

		// The workspace pulls them byte-exact, as pendingctl pull does.
		wsc, err := client.New(api.URL, srv.WorkspaceToken(t, wsMain))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pr, err := inbox.New(wsc, wsMain, dir).Pull(ctx)
		if err != nil {
			t.Fatalf("pull: %v", err)
		}
		if len(pr.Delivered) != 3 {
			t.Fatalf("pull delivered %d files: %+v", len(pr.Delivered), pr.Delivered)
		}
		onDisk := apptest.DirFiles(t, dir, inbox.StateDirName)
		for _, w := range want {
			if !bytes.Equal(onDisk[w.name], w.body) {
				t.Errorf("pulled %s: %d bytes, not the %d bytes the browser sent", w.name, len(onDisk[w.name]), len(w.body))
			}
		}
	})

	t.Run("AbortMidPutStoresNothing", func(t *testing.T) {
		ab := res.Abort
		if ab.OK || ab.Error == nil || !ab.Error.IsPendingUploadsErr || ab.Error.Code != "aborted" {
			t.Fatalf("want a PendingUploadsError with code aborted, got ok=%v %+v", ab.OK, ab.Error)
		}
		t.Logf("aborted at %d of %d bytes", ab.AbortedAt, ab.Total)
		if ab.AbortedAt <= 0 || ab.AbortedAt >= ab.Total {
			t.Fatalf("aborted at %d of %d bytes: not in the middle of the PUT", ab.AbortedAt, ab.Total)
		}
		if u, a := rowsOf(t, srv, wsAbort); u != 0 || a != 0 {
			t.Errorf("after an abort: %d uploads, %d activity rows; want none", u, a)
		}
		// The client dropped the upload on the server too.
		if n := count(t, srv, `SELECT count(*) FROM presigned_uploads WHERE workspace_id = $1`, wsAbort); n != 0 {
			t.Errorf("after an abort: %d presigned uploads left", n)
		}
		// The PUT itself was cut off: the bucket has no staged object
		// either (an abort honoured only before the commit would leave one).
		for _, prefix := range []string{"objects/", "staging/"} {
			if objs := objectsUnder(t, s3c, srv.Bucket, prefix+wsAbort.String()+"/"); len(objs) != 0 {
				t.Errorf("after an abort: %d objects under %s", len(objs), prefix)
			}
		}
	})

	t.Run("RetriesPutAndCommit", func(t *testing.T) {
		rt := res.Retry
		if !rt.OK {
			t.Fatalf("a 5 MiB upload through a failed PUT and a failed commit: %+v", rt.Error)
		}
		body := pattern(fiveMiB, 5)
		if len(rt.Result.Files) != 1 || rt.Result.Files[0].SHA256 != sha256Hex(body) {
			t.Fatalf("answer: %+v", rt.Result.Files)
		}
		if p, c := retryPuts.Load(), retryCommits.Load(); p != 2 || c != 2 {
			t.Errorf("%d PUTs and %d commits; want 2 and 2 (each retried once)", p, c)
		}
		if p := rt.Progress; p.Last == nil || p.Last.Loaded != fiveMiB || p.Last.Total != fiveMiB {
			t.Errorf("progress: last %+v, want %d of %d", p.Last, fiveMiB, fiveMiB)
		}
		if u, a := rowsOf(t, srv, wsRetry); u != 1 || a != 1 {
			t.Errorf("rows: %d uploads, %d activity rows; want 1 and 1", u, a)
		}
	})

	t.Run("MultipartNotRetried", func(t *testing.T) {
		nr := res.NoRetry
		if nr.OK || nr.Error == nil || !nr.Error.IsPendingUploadsErr || nr.Error.Status != http.StatusBadGateway {
			t.Fatalf("want a PendingUploadsError with status 502, got ok=%v %+v", nr.OK, nr.Error)
		}
		// The service stored the file and the answer was lost: one POST,
		// one row, never a second copy.
		if n := noRetryPosts.Load(); n != 1 {
			t.Errorf("%d multipart POSTs, want 1", n)
		}
		if u, a := rowsOf(t, srv, wsNoRetry); u != 1 || a != 1 {
			t.Errorf("rows: %d uploads, %d activity rows; want 1 and 1", u, a)
		}
	})

	t.Run("DigestMismatch", func(t *testing.T) {
		tp := res.Tampered
		if tp.OK || tp.Error == nil || !tp.Error.IsPendingUploadsErr || tp.Error.Code != "digest_mismatch" {
			t.Fatalf("an answer with another sha256: want a PendingUploadsError with code digest_mismatch, got ok=%v %+v", tp.OK, tp.Error)
		}
		// The server did store it: the error names it, so the canvas can say so.
		if len(tp.Error.Staged) != 1 || tp.Error.Staged[0].Name != "checked.txt" {
			t.Errorf("staged with the error: %+v", tp.Error.Staged)
		}
	})

	t.Run("OriginNotAllowed", func(t *testing.T) {
		rf := res.Refused
		for name, r := range map[string]struct {
			OK    bool
			Error *jsError
		}{"uploadFiles": rf.Client, "uploadFiles with limits": rf.ClientWithLimits} {
			if r.OK || r.Error == nil || !r.Error.IsPendingUploadsErr || r.Error.Code != "network" || r.Error.Status != 0 {
				t.Errorf("%s from a denied origin: want a PendingUploadsError code network, got ok=%v %+v", name, r.OK, r.Error)
			}
		}
		if rf.Fetch.OK || rf.Fetch.Error == nil || rf.Fetch.Error.Name != "TypeError" {
			t.Errorf("fetch from a denied origin: want a TypeError, got %+v", rf.Fetch)
		}
		if n := fromDenied.Load(); n != 0 {
			t.Errorf("%d POSTs reached the service from the denied origin", n)
		}
		if u, a := rowsOf(t, srv, wsDenied); u != 0 || a != 0 {
			t.Errorf("denied origin: %d uploads, %d activity rows; want none", u, a)
		}
	})
}
