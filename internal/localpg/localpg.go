// Package localpg runs a private PostgreSQL cluster from the machine's own
// binaries (initdb and postgres, found on PATH or under
// /usr/lib/postgresql/*/bin). The tests use a throwaway one; the dev server
// keeps one under .local/.
//
// The server is a direct child of the calling process, started with a
// parent-death signal, so a crashed test binary or a killed dev server
// never leaves a postgres behind. When the caller is root (as in CI), the
// cluster runs as the "postgres" user, because initdb refuses root.
package localpg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options says where the cluster lives and how it runs.
type Options struct {
	// Dir holds the data directory (Dir/data) and the log (Dir/postgres.log).
	// An existing initialized cluster there is reused.
	Dir string
	// Port to listen on, on 127.0.0.1 only. 0 picks one: the port this
	// cluster listened on last (kept in Dir/port) when it is free, so that
	// a URL copied from an earlier run keeps working; else any free one.
	Port int
	// Fast turns off fsync and full-page writes: right for throwaway test
	// clusters, wrong for anything whose data should survive a power cut.
	Fast bool
	// StartTimeout bounds how long Start waits for connections (default 30s).
	StartTimeout time.Duration
}

// Cluster is a running postgres. Stop it with Stop; it also dies with the
// process that started it.
type Cluster struct {
	opts   Options
	bin    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	cred   *credential
	// created: Start ran initdb (no cluster was there).
	created bool
}

// User is the database superuser every local cluster is created with.
const User = "postgres"

// ErrInUse is matched (errors.Is) by the *InUseError Start returns when a
// postgres already runs on the cluster's data directory: another process
// started it, and a second server on the same data cannot start.
var ErrInUse = errors.New("localpg: cluster in use")

// InUseError is the postgres already running on Dir, as its
// postmaster.pid tells.
type InUseError struct {
	Dir  string // the cluster's folder (Options.Dir)
	PID  int    // the running postmaster's process id
	Port int    // its port, 0 when postmaster.pid does not say
}

func (e *InUseError) Error() string {
	port := ""
	if e.Port > 0 {
		port = fmt.Sprintf(", port %d", e.Port)
	}
	return fmt.Sprintf("localpg: another postgres (pid %d%s) already runs on %s", e.PID, port, e.Dir)
}

// Is makes errors.Is(err, ErrInUse) true.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// portFile keeps, in Dir, the port the cluster listened on last.
const portFile = "port"

// Start initializes the cluster when Dir has none and starts it. It
// returns an *InUseError (ErrInUse) when a postgres already runs on Dir's
// data, and an error quoting the server's own FATAL lines when it exits
// while starting.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	c := &Cluster{opts: opts, bin: bin}
	if os.Geteuid() == 0 {
		cred, err := credentialFor(User)
		if err != nil {
			return nil, fmt.Errorf("localpg: running as root needs a %q user to own the cluster: %w", User, err)
		}
		c.cred = cred
	}
	// Parents stay searchable (the cluster may run as another user);
	// the cluster's own folder is private.
	if err := os.MkdirAll(filepath.Dir(opts.Dir), 0o755); err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	if err := os.Mkdir(opts.Dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	if err := c.chown(opts.Dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
		c.created = true
	} else if err := c.checkNotRunning(); err != nil {
		return nil, err
	}
	c.port = opts.Port
	if c.port == 0 {
		if c.port, err = c.lastPort(); err != nil {
			return nil, err
		}
	}
	if err := c.Restart(ctx); err != nil {
		return nil, err
	}
	// Best effort: a URL copied from this run works in the next one.
	_ = os.WriteFile(filepath.Join(opts.Dir, portFile), []byte(strconv.Itoa(c.port)+"\n"), 0o600)
	return c, nil
}

// Created reports whether Start initialized the cluster (initdb), as
// opposed to reusing one already in Dir.
func (c *Cluster) Created() bool { return c.created }

// checkNotRunning returns an *InUseError when postmaster.pid names a live
// process. A stale file (its process gone) is postgres's own to remove.
func (c *Cluster) checkNotRunning() error {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return nil // no server, or none we can tell about: postgres decides
	}
	// postmaster.pid: pid, data directory, start time, port, ...
	lines := strings.Split(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 || !processAlive(pid) {
		return nil
	}
	e := &InUseError{Dir: c.opts.Dir, PID: pid}
	if len(lines) > 3 {
		e.Port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	return e
}

// lastPort returns the port in Dir/port when it is free now, else a free
// one.
func (c *Cluster) lastPort() (int, error) {
	if b, err := os.ReadFile(filepath.Join(c.opts.Dir, portFile)); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 && p < 1<<16 {
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				l.Close()
				return p, nil
			}
		}
	}
	return freePort()
}

// FindBin returns the directory holding initdb and postgres.
func FindBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs))) // newest major first
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("localpg: no PostgreSQL server binaries (initdb, postgres) on PATH or under /usr/lib/postgresql/*/bin; install PostgreSQL or set a database URL")
}

// URL is a connection string for database db on this cluster.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, c.port, db)
}

// Port is the TCP port the cluster listens on (127.0.0.1).
func (c *Cluster) Port() int { return c.port }

// PID is the process id of the server (the postmaster), 0 when it is not
// running.
func (c *Cluster) PID() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Restart starts the server again after Stop (same port, same data). Fault
// tests use Stop and Restart to take the database away and bring it back.
func (c *Cluster) Restart(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(c.opts.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("localpg: log: %w", err)
	}
	defer logf.Close()
	if err := c.chown(logf.Name()); err != nil {
		return err
	}
	var logStart int64 // where this start's lines begin
	if fi, err := logf.Stat(); err == nil {
		logStart = fi.Size()
	}
	args := []string{
		"-D", c.dataDir(),
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + c.dataDir(),
		"-c", "max_connections=200",
	}
	if c.opts.Fast {
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off")
	}
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// SIGINT is postgres's "fast shutdown"; it is also what the child gets
	// if this process dies without calling Stop.
	cmd.SysProcAttr = serverAttr(c.cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localpg: start postgres: %w", err)
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(c.exited)

	deadline := time.Now().Add(c.opts.StartTimeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(pctx, c.URL("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case <-c.exited:
			if why := fatalLines(logf.Name(), logStart); why != "" {
				return fmt.Errorf("localpg: postgres exited at start: %s (log: %s)", why, logf.Name())
			}
			return fmt.Errorf("localpg: postgres exited at start; see %s: %w", logf.Name(), err)
		case <-ctx.Done():
			c.Stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.Stop()
			return fmt.Errorf("localpg: postgres not ready after %s; see %s: %w", c.opts.StartTimeout, logf.Name(), err)
		}
	}
}

// Stop shuts the server down (fast shutdown: open connections are
// dropped) and waits up to 30 seconds for it to exit.
func (c *Cluster) Stop() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		_ = c.cmd.Process.Kill()
	}
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd = nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.opts.Dir, "data") }

func (c *Cluster) initdb(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "initdb"),
		"-D", c.dataDir(), "-U", User, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = childAttr(c.cred)
	cmd.Dir = c.opts.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		hint := ""
		if c.cred != nil && errors.Is(err, os.ErrPermission) {
			hint = fmt.Sprintf(" (the %q user must be able to reach %s: is a parent folder private?)", User, c.opts.Dir)
		}
		return fmt.Errorf("localpg: initdb: %w%s: %s", err, hint, strings.TrimSpace(string(out)))
	}
	return nil
}

// fatalLines returns the FATAL, PANIC and HINT lines postgres wrote to
// the log at path from offset on, joined: why it would not start.
func fatalLines(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, level := range []string{"FATAL:", "PANIC:", "HINT:"} {
			if i := strings.Index(line, level); i >= 0 && len(out) < 6 {
				out = append(out, strings.Join(strings.Fields(line[i:]), " "))
				break
			}
		}
	}
	return strings.Join(out, " ")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localpg: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
