package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/inbox"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// stallingBody lets its first n bytes through, then, at the next read,
// calls stall once and waits for the request to end, as a download on a
// link that stopped.
type stallingBody struct {
	io.ReadCloser
	ctx   context.Context
	n     int
	stall func()
}

func (s *stallingBody) Read(p []byte) (int, error) {
	if s.n <= 0 {
		s.stall()
		<-s.ctx.Done()
		return 0, s.ctx.Err()
	}
	p = p[:min(len(p), s.n)]
	k, err := s.ReadCloser.Read(p)
	s.n -= k
	return k, err
}

// TestPullInterrupted: Ctrl-C (SIGINT) while pull downloads a file says
// what happened and what to do, as upload does (not "read: interrupt
// signal received"), keeps the partial download, and the same command
// again resumes it and delivers the file whole. --once exits 1, as
// upload does (the file is not delivered); --interval, which a signal is
// the way to stop, exits 0 with the same note.
func TestPullInterrupted(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	for _, tc := range []struct {
		mode, say string
		code      int
	}{{"--once", "interrupted", 1}, {"--interval=100ms", "stopped", 0}} {
		mode := tc.mode
		t.Run(strings.TrimPrefix(strings.SplitN(mode, "=", 2)[0], "--"), func(t *testing.T) {
			ws := uuid.New()
			tok := srv.WorkspaceToken(t, ws)
			data := randomBytes(2<<20, 7)
			paths, _ := fixture(t, map[string][]byte{"big.bin": data})
			expect(t, exe(t, apiVars(srv, "", srv.AdminToken), "upload", "--workspace", ws.String(), paths[0]), 0, "upload")
			dir := t.TempDir()

			var proc atomic.Pointer[os.Process]
			var once sync.Once
			target, _ := url.Parse(srv.URL)
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.ModifyResponse = func(resp *http.Response) error {
				if strings.HasSuffix(resp.Request.URL.Path, "/content") {
					resp.Body = &stallingBody{ReadCloser: resp.Body, ctx: resp.Request.Context(), n: 256 << 10,
						stall: func() {
							once.Do(func() { _ = proc.Load().Signal(os.Interrupt) })
						}}
				}
				return nil
			}
			front := httptest.NewServer(proxy)
			defer front.Close()

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := []string{"pull", "--workspace", ws.String(), "--dir", dir, mode}
			cmd := exec.CommandContext(ctx, binary(t), args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PENDINGUPLOADS_API=" + front.URL, "PENDINGUPLOADS_TOKEN=" + tok}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			proc.Store(cmd.Process)
			_ = cmd.Wait()
			r := result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
			expect(t, r, tc.code, "interrupted pull")
			t.Logf("stderr of the interrupted pull: %s", r.stderr)
			if strings.Contains(r.stderr, "signal received") || strings.Contains(r.stderr, "failed ") {
				t.Errorf("stderr: got %q, want no read error", r.stderr)
			}
			if want := "pendingctl pull: " + tc.say + "; files already pulled are kept, and a download cut short resumes: run the same command again"; !strings.Contains(r.stderr, want) {
				t.Errorf("stderr: got %q, want %q", r.stderr, want)
			}
			if n := unacked(t, srv, ws); n != 1 {
				t.Fatalf("unacked after the interruption: %d, want 1", n)
			}
			if got := apptest.DirFiles(t, dir, inbox.StateDirName); len(got) != 0 {
				t.Fatalf("delivered after the interruption: %d files, want none", len(got))
			}

			r = exe(t, apiVars(srv, "", tok), "pull", "--workspace", ws.String(), "--dir", dir, "--once")
			expect(t, r, 0, "pull again")
			if got := apptest.DirFiles(t, dir, inbox.StateDirName); !bytes.Equal(got["big.bin"], data) {
				t.Fatalf("inbox after the second pull: %d files, big.bin %d bytes; want it whole", len(got), len(got["big.bin"]))
			}
			if n := unacked(t, srv, ws); n != 0 {
				t.Fatalf("unacked: %d, want 0", n)
			}
		})
	}
}
