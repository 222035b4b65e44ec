package localpg_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/localpg"
)

// clusterDir is a fresh folder for a cluster, reachable by the "postgres"
// user the cluster runs as when the tests run as root.
func clusterDir(t *testing.T) string {
	t.Helper()
	if _, err := localpg.FindBin(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "pg")
}

func start(t *testing.T, opts localpg.Options) (*localpg.Cluster, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts.Fast = true
	c, err := localpg.Start(ctx, opts)
	if err == nil {
		t.Cleanup(c.Stop)
	}
	return c, err
}

// TestSecondServerOnTheSameData: a second Start on a folder whose server
// runs says so, naming the running one; once it stops, a new Start
// reuses the data and the port of the first.
func TestSecondServerOnTheSameData(t *testing.T) {
	dir := clusterDir(t)
	first, err := start(t, localpg.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created() {
		t.Error("first Start: Created() is false, want true")
	}
	_, err = start(t, localpg.Options{Dir: dir})
	var inUse *localpg.InUseError
	if !errors.Is(err, localpg.ErrInUse) || !errors.As(err, &inUse) {
		t.Fatalf("second Start: got %v, want an InUseError", err)
	}
	if inUse.PID <= 0 || inUse.Port != first.Port() || inUse.Dir != dir {
		t.Errorf("InUseError: got %+v, want pid > 0, port %d, dir %s", inUse, first.Port(), dir)
	}
	if !strings.Contains(err.Error(), "already runs on "+dir) {
		t.Errorf("message: got %q", err)
	}

	port := first.Port()
	first.Stop()
	again, err := start(t, localpg.Options{Dir: dir})
	if err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	if again.Created() || again.Port() != port {
		t.Errorf("Start after Stop: Created %v, port %d; want false, %d (the last one)", again.Created(), again.Port(), port)
	}
}

// TestExitAtStartQuotesTheLog: a server that cannot start (its port is
// taken) is reported with postgres's own FATAL line, not only a path.
func TestExitAtStartQuotesTheLog(t *testing.T) {
	dir := clusterDir(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = start(t, localpg.Options{Dir: dir, Port: l.Addr().(*net.TCPAddr).Port})
	if err == nil || !strings.Contains(err.Error(), "FATAL:") || !strings.Contains(err.Error(), "postgres.log") {
		t.Fatalf("got %v, want postgres's FATAL line and the log's path", err)
	}
	t.Log(err)
}
