package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/push/localbroker"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// lockedBuffer is a bytes.Buffer a running command writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWatchPull: pendingctl pull --watch, with nothing but what a pull
// needs (the API's URL, the token, the workspace), subscribes where the
// server's limits say, says so in one line, and delivers a file by its
// hint, since its fallback is an hour (how soon after its upload's 200 is
// logged, not asserted: a loaded machine is no measure); it stops
// cleanly. Against a server without push it says to use --interval, and
// --watch beside --interval is a usage error.
func TestWatchPull(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	b, err := localbroker.Start("127.0.0.1:0", srv.Store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	srv.Store.Notifier = &push.Hints{Publisher: b}
	srv.App.API.Limits.Push = &httpapi.Push{URL: b.URL(), TopicTemplate: push.TopicTemplate}
	hs := httptest.NewServer(srv.App.API.Mux())
	t.Cleanup(hs.Close)

	ws := uuid.New()
	vars := apiVars(srv, hs.URL, srv.WorkspaceToken(t, ws))
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var out, errb lockedBuffer
	go func() {
		done <- run(ctx, []string{"pull", "--workspace", ws.String(), "--dir", dir, "--watch", "--fallback-interval", "1h"},
			func(k string) string { return vars[k] }, &out, &errb)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errb.String(), "pendingctl pull: connected to "+b.URL()) {
		if time.Now().After(deadline) {
			t.Fatalf("not connected within 10s; stderr %q", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // its first pull

	admin, err := client.New(hs.URL, srv.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	uctx, ucancel := context.WithTimeout(ctx, 30*time.Second)
	defer ucancel()
	if _, err := admin.Upload(uctx, ws, []client.UploadFile{client.BytesFile("hinted.txt", "", []byte("hinted"))}); err != nil {
		t.Fatal(err)
	}
	ok200 := time.Now()
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "hinted.txt")); err == nil && string(b) == "hinted" {
			break
		}
		if time.Since(ok200) > 10*time.Second { // the fallback is an hour: only the hint can bring it
			t.Fatalf("hinted.txt not delivered within 10s of its 200, with no poll due for an hour; stdout %q, stderr %q", out.String(), errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("delivered %s after the upload's 200", time.Since(ok200).Round(time.Millisecond))
	for !strings.Contains(out.String(), "delivered "+filepath.Join(dir, "hinted.txt")) && time.Since(ok200) < 10*time.Second {
		time.Sleep(10 * time.Millisecond) // the ack, then the line
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d, want 0; stderr %q", code, errb.String())
	}
	if !strings.Contains(out.String(), "delivered "+filepath.Join(dir, "hinted.txt")) {
		t.Errorf("stdout %q: want the delivered line", out.String())
	}

	plain := apptest.NewServer(t, apptest.Options{}) // no push
	noPush := apiVars(plain, "", plain.WorkspaceToken(t, ws))
	r := cli(t, noPush, "pull", "--workspace", ws.String(), "--dir", t.TempDir(), "--watch")
	if r.code != 1 || !strings.Contains(r.stderr, "publishes no upload hints") || !strings.Contains(r.stderr, "--interval") {
		t.Errorf("--watch against a server without push: exit %d, stderr %q; want 1 and a pointer to --interval", r.code, r.stderr)
	}
	expect(t, cli(t, noPush, "pull", "--workspace", ws.String(), "--dir", "d", "--watch", "--interval", "5s"), 2, "--watch with --interval")
	expect(t, cli(t, noPush, "pull", "--workspace", ws.String(), "--dir", "d", "--watch", "--fallback-interval", "10ms"), 2, "--fallback-interval 10ms")
}
