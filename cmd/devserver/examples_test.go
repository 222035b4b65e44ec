package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// TestExamplesHandler: the page's server serves the files directly in
// examples/ and clients/js/, and nothing else of the repository.
func TestExamplesHandler(t *testing.T) {
	root := t.TempDir()
	for path, body := range map[string]string{
		"examples/upload.html":                 "<!doctype html>",
		"clients/js/pendinguploads.js":         "export {}",
		"clients/js/node_modules/x/index.js":   "secret",
		"clients/js/.env":                      "secret",
		"go.mod":                               "module x",
		"internal/auth/tokens.go":              "package auth",
		"examples/sub/nested.html":             "nested",
		"clients/js/browsertest/testdata/a.js": "test",
	} {
		p := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := examplesHandler(root)
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/examples/upload.html", 200, "text/html; charset=utf-8"},
		{"HEAD", "/examples/upload.html", 200, "text/html; charset=utf-8"},
		{"GET", "/clients/js/pendinguploads.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/", 302, ""},
		{"POST", "/examples/upload.html", 405, ""},
		{"GET", "/go.mod", 404, ""},
		{"GET", "/internal/auth/tokens.go", 404, ""},
		{"GET", "/clients/js/node_modules/x/index.js", 404, ""},
		{"GET", "/clients/js/.env", 404, ""},
		{"GET", "/clients/js/browsertest/testdata/a.js", 404, ""},
		{"GET", "/examples/sub/nested.html", 404, ""},
		{"GET", "/examples/../go.mod", 404, ""},
		{"GET", "/examples/", 404, ""},
		{"GET", "/examples/missing.html", 404, ""},
	} {
		rec := httptestRecorder(h, tc.method, tc.path)
		if rec.Code != tc.status || (tc.ctype != "" && rec.Header().Get("Content-Type") != tc.ctype) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.status, tc.ctype)
		}
	}
}

var pageLine = regexp.MustCompile(`(?m)^\s+(http://127\.0\.0\.1:\d+)/examples/upload\.html#api=(\S+)&workspace=(\S+)&token=(\S+)$`)

// TestExamplePage starts the dev server as make run-s3 does (its own
// Postgres, its own S3), fetches the page and the module at the URL its
// banner prints, checks that the API answers the page's origin with
// CORS, and, where Chromium and playwright-core are installed, has
// Chromium use the page as a person would: two files up (one through the
// bucket, in parts), listed, each downloaded byte-exact, each acked. The
// parts are S3's least (MULTIPART_THRESHOLD_BYTES and MULTIPART_PART_BYTES
// at 5 MiB, which the page learns from the service's limits as it learns
// the defaults): a 6 MiB file goes in two, as a 20 MiB one would in three.
func TestExamplePage(t *testing.T) {
	if _, err := exec.LookPath("moto_server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("moto_server is not on PATH, and CI is set")
		}
		t.Skip("moto_server is not on PATH")
	}
	stdout := startDevServer(t, localDevEnv(t, map[string]string{"LOCAL_S3": "1",
		"MULTIPART_THRESHOLD_BYTES": strconv.Itoa(limits.MinPartBytes), "MULTIPART_PART_BYTES": strconv.Itoa(limits.MinPartBytes)})).stdout
	banner := stdout.String()
	m := pageLine.FindStringSubmatch(banner)
	if m == nil || !strings.Contains(banner, "CORS_ALLOWED_ORIGINS="+m[1]+" for it, set by the dev server") {
		t.Fatalf("banner lacks the page's URL, or the CORS_ALLOWED_ORIGINS it needs:\n%s", banner)
	}
	origin, api, ws, token := m[1], m[2], m[3], m[4]
	pageURL := strings.TrimSpace(strings.SplitN(m[0], "\n", 2)[0])

	get := func(url string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, body := get(pageURL)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!bytes.Contains(body, []byte(`"@pendinguploads/client": "/clients/js/pendinguploads.js"`)) {
		t.Fatalf("the page at %s: %d %s, %d bytes, want the example page with its import map", pageURL, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	// The one import, and the module it takes uploadFiles from, beside it.
	resp, body = get(origin + "/clients/js/pendinguploads.js")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") ||
		!bytes.Contains(body, []byte(`export { uploadFiles } from "./upload.js"`)) {
		t.Fatalf("the module: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, body = get(origin + "/clients/js/upload.js")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") ||
		!bytes.Contains(body, []byte("export async function uploadFiles")) {
		t.Fatalf("the module it imports: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	req, _ := http.NewRequest(http.MethodOptions, api+"/workspaces/"+ws+"/chat/uploads", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization")
	pre, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pre.Body.Close()
	if pre.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Fatalf("the API's preflight for the page's origin: %d, Access-Control-Allow-Origin %q", pre.StatusCode, pre.Header.Get("Access-Control-Allow-Origin"))
	}

	chromium, node, driver := "/usr/bin/chromium", "", filepath.Join("..", "..", "clients", "js", "browsertest", "testdata", "example.mjs")
	node, _ = exec.LookPath("node")
	if _, err := os.Stat(filepath.Join("..", "..", "clients", "js", "node_modules", "playwright-core", "package.json")); err != nil || node == "" {
		t.Skip("no node or playwright-core (clients/js: npm ci): the page was served, not used")
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no Chromium: the page was served, not used")
	}
	files := []map[string]any{
		{"name": "notes.txt", "size": 3000, "type": "text/plain", "seed": 1},
		{"name": "video.bin", "size": limits.MinPartBytes + 1<<20, "type": "application/octet-stream", "seed": 2},
	}
	cfg, _ := json.Marshal(map[string]any{"chromium": chromium, "url": pageURL, "files": files})
	dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer dcancel()
	cmd := exec.CommandContext(dctx, node, driver, string(cfg))
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("example.mjs: %v\n%s", err, errOut.Bytes())
	}
	t.Logf("the page used in Chromium in %s", time.Since(start).Round(time.Millisecond))
	var res struct {
		Status    string
		Listed    []string
		Left      int
		Sent      []struct{ Name, SHA256 string }
		Downloads []struct {
			Name   string
			Size   int64
			SHA256 string
		}
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("example.mjs output: %v\n%s\n%s", err, out.Bytes(), errOut.Bytes())
	}
	if !strings.HasPrefix(res.Status, "Uploaded 2 file(s)") || len(res.Listed) != 2 {
		t.Fatalf("upload in the page: %q, listed %v\n%s", res.Status, res.Listed, errOut.Bytes())
	}
	sent := map[string]string{}
	for _, s := range res.Sent {
		sent[s.Name] = s.SHA256
	}
	if len(res.Downloads) != 2 {
		t.Fatalf("downloads: %+v", res.Downloads)
	}
	for _, d := range res.Downloads {
		if sent[d.Name] == "" || d.SHA256 != sent[d.Name] {
			t.Errorf("downloaded %s (%d bytes, sha256 %s): not the bytes sent", d.Name, d.Size, d.SHA256)
		}
	}
	if res.Left != 0 {
		t.Errorf("files listed after acking each: %d", res.Left)
	}
	// And the service agrees: nothing waits.
	req, _ = http.NewRequest(http.MethodGet, api+"/workspaces/"+ws+"/pending-uploads", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	lr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Body.Close()
	if b, _ := io.ReadAll(lr.Body); lr.StatusCode != 200 || !bytes.Contains(b, []byte(`"uploads":[]`)) {
		t.Errorf("list after the page's acks: %d %s", lr.StatusCode, b)
	}
}

func httptestRecorder(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// TestListenExamples: EXAMPLES_PORT off, bad, taken, given; by default
// the API's port + 100, or any free port when that one is taken.
func TestListenExamples(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "EXAMPLES_PORT" {
				return v
			}
			return ""
		}
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	api := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: takenPort - examplesPortOffset}

	if ln, err := listenExamples(env("off"), api); ln != nil || err != nil {
		t.Errorf("off: %v, %v; want no listener, no error", ln, err)
	}
	for _, bad := range []string{"abc", "-1", "70000", strconv.Itoa(takenPort)} {
		if ln, err := listenExamples(env(bad), api); ln != nil || err == nil || !strings.Contains(err.Error(), "EXAMPLES_PORT") {
			t.Errorf("EXAMPLES_PORT=%s: %v, %v; want an error naming EXAMPLES_PORT", bad, ln, err)
		}
	}
	// The default port is taken: any free one.
	ln, err := listenExamples(env(""), api)
	if err != nil || ln == nil || ln.Addr().(*net.TCPAddr).Port == takenPort {
		t.Fatalf("default with API+100 taken: %v, %v", ln, err)
	}
	free := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// Free: the API's port + 100.
	ln, err = listenExamples(env(""), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: free - examplesPortOffset})
	if err != nil || ln == nil || ln.Addr().(*net.TCPAddr).Port != free {
		t.Fatalf("default: %v, %v; want port %d", ln, err, free)
	}
	ln.Close()
}
