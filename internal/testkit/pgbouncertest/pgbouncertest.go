// Package pgbouncertest puts a real PgBouncer (Debian's pgbouncer
// package; scripts/ensure-tools.sh installs it) in front of a test's
// Postgres: a transaction pooler, as a Lambda fleet meets one, on a
// loopback port, started by the test and stopped at its cleanup.
//
// The bouncer accepts its clients without a password (auth_type trust,
// as the test clusters of pgtest do; loopback only) and logs in to
// Postgres as the URL's user, with the URL's password when it has one.
//
// Use it as:
//
//	u := pgtest.MustURL(t)
//	b := pgbouncertest.MustStart(t, u, pgbouncertest.Options{})
//	… connect to b.URL …
package pgbouncertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// StartTimeout bounds how long MustStart waits for PgBouncer to answer.
const StartTimeout = 20 * time.Second

// Options shape a PgBouncer. The zero value is transaction pooling with
// two server connections per database and user.
type Options struct {
	// PoolSize is default_pool_size: the server connections per database
	// and user (default 2).
	PoolSize int
	// IgnoreStartupParameters is ignore_startup_parameters: startup
	// parameters the bouncer accepts from a client and drops (it refuses
	// any other it does not know, such as statement_timeout).
	IgnoreStartupParameters []string
}

// Bouncer is a running PgBouncer.
type Bouncer struct {
	// URL is the test's database URL pointed at the bouncer.
	URL string
	// Addr is the bouncer's host:port on 127.0.0.1.
	Addr string
	// Log is the path of the bouncer's log file.
	Log string

	cmd    *exec.Cmd
	exited chan struct{}
}

// MustStart starts a PgBouncer in transaction mode in front of the
// server of databaseURL (a postgres:// URL, as pgtest's) and returns it;
// Bouncer.URL is databaseURL with the bouncer's address. It waits up to
// StartTimeout for the bouncer to answer, and stops it at the test's
// cleanup.
//
// When pgbouncer is not installed the test is skipped, or fails when the
// CI variable is set (CI must run these tests). Any other failure to
// start fails the test with the bouncer's log.
func MustStart(tb testing.TB, databaseURL string, opts Options) *Bouncer {
	tb.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer" // Debian's, often not on a user's PATH
		if _, serr := os.Stat(bin); serr != nil || !supported {
			why := "pgbouncer is not installed (apt-get install pgbouncer; scripts/ensure-tools.sh does)"
			if !supported {
				why = "PgBouncer runs in these tests on Linux only"
			}
			if os.Getenv("CI") != "" {
				tb.Fatalf("pgbouncertest: %s (CI is set, so this is a failure)", why)
			}
			tb.Skipf("pgbouncertest: %s", why)
		}
	}
	// Not tb.TempDir: its parents are private to this user, and the
	// bouncer may run as another.
	dir, err := os.MkdirTemp("", "pgbouncertest-")
	if err != nil {
		tb.Fatalf("pgbouncertest: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	b, err := start(bin, databaseURL, opts, dir)
	if err != nil {
		tb.Fatalf("pgbouncertest: %v", err)
	}
	tb.Cleanup(b.stop)
	return b
}

// start starts the bouncer with its files in dir.
func start(bin, databaseURL string, opts Options, dir string) (*Bouncer, error) {
	up, err := url.Parse(databaseURL)
	if err != nil || (up.Scheme != "postgres" && up.Scheme != "postgresql") || up.Hostname() == "" {
		return nil, errors.New("want a postgres:// URL with a host")
	}
	upPort := up.Port()
	if upPort == "" {
		upPort = "5432"
	}
	attr, cred, err := procAttr()
	if err != nil {
		return nil, err
	}
	// The folder must be the bouncer's when it runs as another user.
	if err := chown(dir, cred); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	poolSize := opts.PoolSize
	if poolSize <= 0 {
		poolSize = 2
	}
	password, _ := up.User.Password()
	files := map[string]string{
		"userlist.txt": fmt.Sprintf("%s %s\n", quote(up.User.Username()), quote(password)),
		"pgbouncer.ini": fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 500
ignore_startup_parameters = %s
logfile = %s
`, up.Hostname(), upPort, port, filepath.Join(dir, "userlist.txt"), poolSize,
			strings.Join(opts.IgnoreStartupParameters, ","), filepath.Join(dir, "pgbouncer.log")),
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return nil, err
		}
		if err := chown(p, cred); err != nil {
			return nil, err
		}
	}
	b := &Bouncer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Log: filepath.Join(dir, "pgbouncer.log"), exited: make(chan struct{})}
	u := *up
	u.Host = b.Addr
	b.URL = u.String()

	var out bytes.Buffer
	b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	b.cmd.Dir = dir
	b.cmd.Stdout, b.cmd.Stderr = &out, &out
	b.cmd.SysProcAttr = attr
	// Pdeathsig fires when the thread that started the child exits: start
	// and wait on a thread locked for the child's whole life. Unlocked
	// after, not ended with the goroutine: the runtime would end the
	// thread, and the thread may have started another child with a
	// Pdeathsig earlier (the test's postgres, which would then shut down).
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := b.cmd.Start(); err != nil {
			started <- err
			close(b.exited)
			return
		}
		started <- nil
		_ = b.cmd.Wait()
		close(b.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	if err := b.waitReady(StartTimeout); err != nil {
		b.stop()
		logText, _ := os.ReadFile(b.Log)
		return nil, fmt.Errorf("pgbouncer on %s: %w; output:\n%s%s", b.Addr, err, out.String(), logText)
	}
	return b, nil
}

// waitReady waits until the bouncer completes a client's startup, or it
// exits, or timeout passes.
func (b *Bouncer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var c *pgconn.PgConn
		c, err = pgconn.Connect(ctx, b.URL)
		if err == nil {
			err = c.Exec(ctx, "SELECT 1").Close()
			_ = c.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-b.exited:
			return fmt.Errorf("exited at start: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready after %s: %w", timeout, err)
}

// stop stops the bouncer (SIGTERM: immediate shutdown, open connections
// dropped), killing it after 10 s.
func (b *Bouncer) stop() {
	if b.cmd.Process == nil {
		return
	}
	signalGroup(b.cmd.Process, syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		signalGroup(b.cmd.Process, syscall.SIGKILL)
		<-b.exited
	}
}

// quote is s as an auth_file field: in double quotes, a quote doubled.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
