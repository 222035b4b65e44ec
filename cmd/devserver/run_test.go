package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to write from the server and read
// from the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// localDevEnv is make run's environment on a fresh clone, in a LOCAL_DIR
// of the test's (its own Postgres, a free loopback port), with extra.
func localDevEnv(t *testing.T, extra map[string]string) map[string]string {
	t.Helper()
	local := t.TempDir()
	// As root the cluster runs as "postgres", which must be able to reach
	// it: t.TempDir's parent is private to root.
	if err := os.Chmod(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LOCAL_DIR": local, "PORT": "0", "HOST": "127.0.0.1"}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// devServer is a dev server run in this process by startDevServer.
type devServer struct {
	addr           string
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	exit           chan int
	once           sync.Once
	code           int
}

// stop stops the server as Ctrl-C does and returns its exit status, or
// -1 when it did not stop within a minute. Later calls return the same.
func (d *devServer) stop() int {
	d.once.Do(func() {
		d.cancel()
		select {
		case d.code = <-d.exit:
		case <-time.After(time.Minute):
			d.code = -1
		}
	})
	return d.code
}

// startDevServer runs the dev server in this process with exactly env and
// returns it once it is ready (the banner printed); the test's end stops
// it, if the test did not.
func startDevServer(t *testing.T, env map[string]string) *devServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &devServer{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, exit: make(chan int, 1)}
	ready := make(chan string, 1)
	go func() { d.exit <- run(ctx, func(k string) string { return env[k] }, d.stdout, d.stderr, ready) }()
	t.Cleanup(func() {
		if d.stop() == -1 {
			t.Error("dev server did not stop")
		}
	})
	select {
	case d.addr = <-ready:
	case code := <-d.exit:
		d.once.Do(func() { d.code = code })
		t.Fatalf("dev server exited %d:\n%s\n%s", code, d.stdout.String(), d.stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("dev server not ready:\n%s", d.stderr.String())
	}
	return d
}

// TestMakeRunPrintedCurlWorks starts the dev server as `make run` does on
// a fresh clone (no DATABASE_URL: it starts its own Postgres), runs the
// curl line it prints, and then lists, fetches and acks the staged file
// with the workspace token it prints.
func TestMakeRunPrintedCurlWorks(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not on PATH")
	}
	dev := startDevServer(t, localDevEnv(t, nil))
	stdout, stderr := dev.stdout, dev.stderr
	banner := stdout.String()

	curlLine := regexp.MustCompile(`(?m)^\s+(curl -sS -F files=@README.md .*)$`).FindStringSubmatch(banner)
	wsToken := regexp.MustCompile(`workspace token\s+(\S+)`).FindStringSubmatch(banner)
	listURL := regexp.MustCompile(`(http://\S+/pending-uploads)\n`).FindStringSubmatch(banner)
	if curlLine == nil || wsToken == nil || listURL == nil {
		t.Fatalf("banner lacks the curl line, token or URL:\n%s", banner)
	}
	dir := t.TempDir()
	content := []byte("# a README\nstaged by the printed curl line\n")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), content, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", curlLine[1])
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("printed curl line failed: %v\n%s", err, out)
	}
	var staged struct {
		Files []struct {
			FileID string `json:"file_id"`
			Name   string `json:"name"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &staged); err != nil || len(staged.Files) != 1 || staged.Files[0].Name != "README.md" {
		t.Fatalf("curl answer: %s (%v)", out, err)
	}
	id := staged.Files[0].FileID

	call := func(method, url string) (int, []byte) {
		code, _, b := callAPI(t, nil, method, url, wsToken[1], "", nil)
		return code, b
	}
	checkUnrouted(t, listURL[1], wsToken[1], id)
	if code, b := call("GET", listURL[1]); code != 200 || !strings.Contains(string(b), id) || !strings.Contains(string(b), `"fetched_at":null`) {
		t.Fatalf("list: %d %s", code, b)
	}
	if code, b := call("GET", listURL[1]+"/"+id+"/content"); code != 200 || !bytes.Equal(b, content) {
		t.Fatalf("content: %d %q", code, b)
	}
	if code, b := call("POST", listURL[1]+"/"+id+"/ack"); code != 200 || !strings.Contains(string(b), `"acked":true`) {
		t.Fatalf("ack: %d %s", code, b)
	}
	if strings.Contains(stderr.String(), wsToken[1]) {
		t.Fatal("the workspace token appears in the log")
	}
	// Each request has an id: in X-Request-Id, and on its access line.
	resp, err := http.Get(listURL[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rid := resp.Header.Get("X-Request-Id")
	logged := func() bool { return strings.Contains(stderr.String(), `"request_id":"`+rid+`"`) }
	// The access line is written once the handler returns, which may be
	// just after the client has the answer.
	for i := 0; i < 100 && rid != "" && !logged(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if rid == "" || !logged() {
		t.Errorf("request id %q is not on a log line:\n%s", rid, stderr.String())
	}

	switch code := dev.stop(); code {
	case 0:
	case -1:
		t.Fatal("dev server did not stop")
	default:
		t.Fatalf("exit status %d on Ctrl-C:\n%s", code, stderr.String())
	}
}

// checkUnrouted holds the dev server to the route table: HEAD on content
// is a JSON 405 with Allow: GET (and reads nothing: the caller checks
// fetched_at is still null), and a path with "//" or "/../" is never
// redirected: a JSON 401 without a token, a JSON 404 with one.
func checkUnrouted(t *testing.T, listURL, token, id string) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(method, url, tok string) (int, http.Header, []byte) {
		return callAPI(t, client, method, url, tok, "", nil)
	}
	content := listURL + "/" + id + "/content"
	code, h, _ := call("HEAD", content, token)
	if code != 405 || h.Get("Allow") != "GET" || h.Get("Content-Type") != "application/json" {
		t.Errorf("HEAD content: got %d, Allow %q, Content-Type %q; want 405, GET, application/json", code, h.Get("Allow"), h.Get("Content-Type"))
	}
	if code, _, b := call("DELETE", content, token); code != 405 || strings.TrimSpace(string(b)) != `{"error":"method not allowed","code":"method_not_allowed"}` {
		t.Errorf("DELETE content: got %d %s, want 405 method not allowed", code, b)
	}
	u, _ := url.Parse(listURL)
	base := u.Scheme + "://" + u.Host
	for _, bad := range []string{
		base + "/" + u.Path,
		strings.Replace(listURL, "/workspaces/", "/workspaces//", 1),
		strings.Replace(listURL, "/workspaces/", "/x/../workspaces/", 1),
		strings.Replace(content, "/pending-uploads/", "/pending-uploads/../pending-uploads/", 1),
	} {
		for tok, want := range map[string]int{"": 401, token: 404} {
			code, h, b := call("GET", bad, tok)
			if code != want || h.Get("Content-Type") != "application/json" || h.Get("Location") != "" {
				t.Errorf("GET %s (token %v): got %d %q Location %q, want a JSON %d", bad, tok != "", code, b, h.Get("Location"), want)
			}
		}
	}
}

// TestLinkAcrossRestart: a download link minted before a restart of make
// run opens after it (the key is kept in LOCAL_DIR beside the admin
// token, mode 0600), as a link outlives a deploy of the stack; a key the
// person sets is theirs, and nothing is written for it.
func TestLinkAcrossRestart(t *testing.T) {
	env := localDevEnv(t, map[string]string{"EXAMPLES_PORT": "off", "PUSH_PORT": "0"})
	dev := startDevServer(t, env)
	wsToken := regexp.MustCompile(`workspace token\s+(\S+)`).FindStringSubmatch(dev.stdout.String())
	listURL := regexp.MustCompile(`(http://\S+/pending-uploads)\n`).FindStringSubmatch(dev.stdout.String())
	if wsToken == nil || listURL == nil {
		t.Fatalf("banner lacks the workspace token or the list URL:\n%s", dev.stdout.String())
	}
	uploads := strings.Replace(listURL[1], "/pending-uploads", "/chat/uploads", 1)
	content := []byte("minted before the restart\n")
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("files", "before.txt")
	_, _ = fw.Write(content)
	_ = mw.Close()
	call := func(method, url, ctype string, b io.Reader) (int, []byte) {
		t.Helper()
		code, _, out := callAPI(t, nil, method, url, wsToken[1], ctype, b)
		return code, out
	}
	code, out := call("POST", uploads, mw.FormDataContentType(), &body)
	var staged struct {
		Files []struct {
			FileID string `json:"file_id"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &staged); code != 200 || err != nil || len(staged.Files) != 1 {
		t.Fatalf("upload: %d %s", code, out)
	}
	code, out = call("POST", listURL[1]+"/"+staged.Files[0].FileID+"/link", "", nil)
	var link struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(out, &link); code != 200 || err != nil || link.URL == "" {
		t.Fatalf("link: %d %s", code, out)
	}
	if code := dev.stop(); code != 0 {
		t.Fatalf("exit status %d on Ctrl-C", code)
	}
	fi, err := os.Stat(filepath.Join(env["LOCAL_DIR"], downloadKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the kept key: %v, %v; want a file of mode 0600", fi, err)
	}

	again := startDevServer(t, env)
	// The link as its holder has it: resolved against the route that gave it.
	base, _ := url.Parse(listURL[1] + "/" + staged.Files[0].FileID + "/link")
	ref, err := url.Parse(link.URL)
	if err != nil {
		t.Fatal(err)
	}
	u := base.ResolveReference(ref)
	u.Host = again.addr // PORT=0: the restart listens elsewhere
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, content) {
		t.Errorf("the link minted before the restart, after it: got %d %s, want 200 and the file", resp.StatusCode, got)
	}
	if code := again.stop(); code != 0 {
		t.Fatalf("restart: exit status %d on Ctrl-C", code)
	}

	// A key of the person's own is used as given, and not written down.
	own := localDevEnv(t, map[string]string{"EXAMPLES_PORT": "off", "PUSH_PORT": "0", "DOWNLOAD_LINK_KEY": strings.Repeat("k", 32)})
	startDevServer(t, own).stop()
	if _, err := os.Stat(filepath.Join(own["LOCAL_DIR"], downloadKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("with DOWNLOAD_LINK_KEY set, %s: got %v, want none", downloadKeyFile, err)
	}
}

// callAPI sends one request through client (http.DefaultClient when nil)
// with token as its bearer and ctype as its Content-Type (neither when
// empty), and returns its status, headers and body.
func callAPI(t *testing.T, client *http.Client, method, url, token, ctype string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}
