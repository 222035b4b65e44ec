//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

// TestMakeRunCtrlC: Ctrl-C on `make run`, as a terminal sends it (SIGINT
// to the whole foreground group: make, the shell, the server), ends a
// clean stop without a word from make: the server exits 0 after its
// shutdown, and make prints no "make: *** [Makefile:…: run] Error 1" (go
// run, which make run used to call, exits 1 when the signal reaches it,
// whatever the program's exit). make itself then dies of the SIGINT it
// got, as make does, or exits 0.
func TestMakeRunCtrlC(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("make is not on PATH, and CI is set")
		}
		t.Skip("make is not on PATH")
	}
	root, err := lambdatest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	if err := os.Chmod(filepath.Dir(local), 0o755); err != nil { // as root, the cluster runs as "postgres"
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mk := exec.CommandContext(ctx, "make", "run")
	mk.Dir = root
	mk.Env = append(newcomerEnv(), "LOCAL_DIR="+local, "PORT=0", "HOST=127.0.0.1", "EXAMPLES_PORT=off", "PUSH_PORT=0")
	var out, errOut syncBuffer
	mk.Stdout, mk.Stderr = &out, &errOut
	mk.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	mk.Cancel = func() error { return syscall.Kill(-mk.Process.Pid, syscall.SIGKILL) }
	if err := mk.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = mk.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-mk.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	waitFor(t, &out, &errOut, exited, "Ctrl-C stops", 4*time.Minute)

	if err := syscall.Kill(-mk.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("make run still runs a minute after Ctrl-C:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "Stopping...") {
		t.Errorf("no 'Stopping...' after Ctrl-C:\n%s", out.String())
	}
	var lines []string
	for _, l := range strings.Split(errOut.String(), "\n") {
		if !strings.HasPrefix(l, "{") { // the server's log records
			lines = append(lines, l)
		}
	}
	if s := strings.Join(lines, "\n"); strings.Contains(s, "make: ***") || strings.Contains(s, "exit status") {
		t.Errorf("make run after a clean stop by Ctrl-C: got an error from make or go:\n%s", s)
	}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT:
	default:
		t.Errorf("make run after a clean stop by Ctrl-C: got %v, want exit 0 or make's own death by SIGINT", waitErr)
	}
}
