//go:build linux

// Command loadgen (Linux only) is a bounded load generator for the dev server: N
// concurrent workspaces, each doing upload → list → content → ack in a
// loop, until -duration passes or -max-requests are sent. It reports
// throughput, p50/p99 per route and errors (any error exits 1), and
// samples pg_stat_activity to show that the server's Postgres connections
// never exceed its pool's MaxConns (exceeding it exits 1 too).
//
// By default it starts everything itself, the way `make run` does: a
// throwaway Postgres (package localpg, in a temporary folder) and the dev
// server (./cmd/devserver built and run on a free 127.0.0.1 port, with
// DATABASE_URL pointing at that Postgres). With -api it drives a running server instead (then -admin-token
// is required, and -database-url enables the connection sampling). It
// talks to loopback addresses only and refuses anything else.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	tokenadmin "github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/localpg"
)

// devServerMaxConns is the MaxConns cmd/devserver gives its pool
// (app.Options{MaxConns: 8} in its run.go). It cannot be set through
// DATABASE_URL's pool_max_conns: the migrations connect with the same URL,
// and Postgres refuses the unknown parameter.
const devServerMaxConns = 8

type options struct {
	workspaces  int
	duration    time.Duration
	maxRequests int64
	size        int
	pool        int
	api         string
	adminToken  string
	databaseURL string
}

func main() {
	var o options
	flag.IntVar(&o.workspaces, "workspaces", 8, "concurrent workspaces, one worker each")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "stop after this long")
	flag.Int64Var(&o.maxRequests, "max-requests", 20000, "stop after this many requests")
	flag.IntVar(&o.size, "size", 64<<10, "bytes per uploaded file")
	flag.IntVar(&o.pool, "pool", devServerMaxConns, "the server's pool MaxConns, to check the connection count against")
	flag.StringVar(&o.api, "api", "", "base URL of a running server on loopback (default: start a dev server)")
	flag.StringVar(&o.adminToken, "admin-token", "", "admin token of the -api server")
	flag.StringVar(&o.databaseURL, "database-url", "", "with -api: its database, for token minting and connection sampling")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.workspaces < 1 || o.size < 1 || o.duration <= 0 || o.maxRequests < 1 || o.pool < 1 {
		return errors.New("-workspaces, -size, -duration, -max-requests and -pool must be positive")
	}
	base, admin, dbURL := o.api, o.adminToken, o.databaseURL
	if base == "" {
		var cleanup func()
		var err error
		base, admin, dbURL, cleanup, err = startDevServer(ctx, o.pool, out)
		if cleanup != nil {
			defer cleanup()
		}
		if err != nil {
			return err
		}
	} else if admin == "" {
		return errors.New("-api needs -admin-token")
	}
	if err := loopbackOnly(base); err != nil {
		return err
	}
	base = strings.TrimRight(base, "/")

	var db *pgxpool.Pool
	if dbURL != "" {
		var err error
		if db, err = pgxpool.New(ctx, dbURL); err != nil {
			return fmt.Errorf("database: %w", err)
		}
		defer db.Close()
	}

	// Workspaces: with a database, each gets its own token (the real
	// path: a token look-up per request); else the admin token acts.
	type workspace struct {
		id    uuid.UUID
		token string
	}
	wss := make([]workspace, o.workspaces)
	for i := range wss {
		wss[i] = workspace{id: uuid.New(), token: admin}
		if db != nil {
			tok, _, err := tokenadmin.CreateToken(ctx, db, wss[i].id)
			if err != nil {
				return fmt.Errorf("workspace token: %w", err)
			}
			wss[i].token = tok
		}
	}

	content := make([]byte, o.size)
	_, _ = rand.Read(content)
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: o.workspaces, Proxy: nil},
	}
	st := newStats()
	lctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()

	// Connection sampling.
	var maxConns atomic.Int64
	var samples atomic.Int64
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		if db == nil {
			return
		}
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var n int64
			if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pendinguploads'`).Scan(&n); err == nil {
				samples.Add(1)
				for {
					m := maxConns.Load()
					if n <= m || maxConns.CompareAndSwap(m, n) {
						break
					}
				}
			}
			select {
			case <-lctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	var sent atomic.Int64
	budget := func() bool { return lctx.Err() == nil && sent.Add(1) <= o.maxRequests }
	fmt.Fprintf(out, "\nloadgen: %d workspaces, %d-byte files, for %s or %d requests against %s\n",
		o.workspaces, o.size, o.duration, o.maxRequests, base)
	start := time.Now()
	var wg sync.WaitGroup
	for i, ws := range wss {
		wg.Go(func() {
			fileName := fmt.Sprintf("load-%d.bin", i)
			wsBase := base + "/workspaces/" + ws.id.String()
			for {
				if !budget() {
					return
				}
				body, ctype := multipartBody(fileName, content)
				var staged struct {
					Files []struct {
						FileID string `json:"file_id"`
					} `json:"files"`
				}
				b, ok := st.do(client, "upload", "POST", wsBase+"/chat/uploads", admin, ctype, body, 200)
				if !ok || json.Unmarshal(b, &staged) != nil || len(staged.Files) != 1 {
					st.fail("upload", "bad success body")
					continue
				}
				id := staged.Files[0].FileID
				if !budget() {
					return
				}
				if b, ok := st.do(client, "list", "GET", wsBase+"/pending-uploads", ws.token, "", nil, 200); ok && !bytes.Contains(b, []byte(id)) {
					st.fail("list", "staged file not listed")
				}
				if !budget() {
					return
				}
				if b, ok := st.do(client, "content", "GET", wsBase+"/pending-uploads/"+id+"/content", ws.token, "", nil, 200); ok && !bytes.Equal(b, content) {
					st.fail("content", "bytes differ")
				}
				if !budget() {
					return
				}
				st.do(client, "ack", "POST", wsBase+"/pending-uploads/"+id+"/ack", ws.token, "", nil, 200)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cancel()
	<-sampleDone

	total, errs := st.report(out, elapsed)
	fmt.Fprintf(out, "\nthroughput: %.0f requests/s (%d requests in %s, %d workers, %d cores)\n",
		float64(total)/elapsed.Seconds(), total, elapsed.Round(time.Millisecond), o.workspaces, runtime.NumCPU())
	fmt.Fprintf(out, "errors: %d\n", errs)
	var fail []string
	if errs > 0 {
		fail = append(fail, fmt.Sprintf("%d errors", errs))
	}
	if db != nil {
		fmt.Fprintf(out, "postgres connections of the server (pg_stat_activity, application_name=pendinguploads): max %d over %d samples; pool MaxConns %d\n",
			maxConns.Load(), samples.Load(), o.pool)
		if maxConns.Load() > int64(o.pool) {
			fail = append(fail, fmt.Sprintf("%d connections exceed the pool's %d", maxConns.Load(), o.pool))
		}
	} else {
		fmt.Fprintln(out, "postgres connections: not sampled (no -database-url)")
	}
	if len(fail) > 0 {
		return errors.New(strings.Join(fail, "; "))
	}
	return nil
}

// loopbackOnly refuses a base URL whose host is not a loopback address.
func loopbackOnly(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("-api %q: not an http(s) URL", base)
	}
	host := u.Hostname()
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("-api %q: cannot resolve %s", base, host)
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("-api %q: %s is not a loopback address; loadgen only drives a local server", base, a)
		}
	}
	return nil
}

func multipartBody(name string, content []byte) ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	pw, _ := mw.CreateFormFile("files", name)
	_, _ = pw.Write(content)
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// startDevServer starts a throwaway Postgres and the dev server on it, the
// way `make run` does, and returns its base URL, admin token and database.
func startDevServer(ctx context.Context, pool int, out io.Writer) (base, admin, dbURL string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "loadgen-")
	if err != nil {
		return "", "", "", nil, err
	}
	var stops []func()
	cleanup = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	stops = append(stops, func() { _ = os.RemoveAll(dir) })
	// Searchable: as root, the cluster runs as the postgres user.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", "", "", cleanup, err
	}
	fmt.Fprintf(out, "loadgen: starting a throwaway Postgres in %s\n", dir)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cluster, err := localpg.Start(sctx, localpg.Options{Dir: filepath.Join(dir, "pg"), Fast: true})
	if err != nil {
		return "", "", "", cleanup, err
	}
	stops = append(stops, cluster.Stop)
	conn, err := pgx.Connect(sctx, cluster.URL("postgres"))
	if err != nil {
		return "", "", "", cleanup, err
	}
	_, err = conn.Exec(sctx, `CREATE DATABASE pendinguploads`)
	_ = conn.Close(sctx)
	if err != nil {
		return "", "", "", cleanup, err
	}
	dbURL = cluster.URL("pendinguploads")
	tok, err := auth.NewToken()
	if err != nil {
		return "", "", "", cleanup, err
	}
	admin = "admin_" + strings.TrimPrefix(tok, auth.TokenPrefix)

	bin := filepath.Join(dir, "devserver")
	fmt.Fprintln(out, "loadgen: building ./cmd/devserver")
	build := exec.CommandContext(sctx, "go", "build", "-o", bin, "./cmd/devserver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", "", "", cleanup, fmt.Errorf("build devserver: %w", err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"ADMIN_TOKEN="+admin, "HOST=127.0.0.1", "PORT=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", "", "", cleanup, err
	}
	logf, err := os.Create(filepath.Join(dir, "devserver.log"))
	if err != nil {
		return "", "", "", cleanup, err
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return "", "", "", cleanup, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stops = append(stops, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logf.Close()
	})
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`dev server on (http://\S+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case base = <-found:
	case <-exited:
		b, _ := os.ReadFile(logf.Name())
		return "", "", "", cleanup, fmt.Errorf("devserver exited at start:\n%s", b)
	case <-sctx.Done():
		return "", "", "", cleanup, errors.New("devserver not ready in time")
	}
	fmt.Fprintf(out, "loadgen: dev server on %s (its pool: MaxConns %d)\n", base, pool)
	return base, admin, dbURL, cleanup, nil
}

// stats keeps latencies and errors per route.
type stats struct {
	mu     sync.Mutex
	lat    map[string][]time.Duration
	errs   map[string]int
	sample map[string]string
}

func newStats() *stats {
	return &stats{lat: map[string][]time.Duration{}, errs: map[string]int{}, sample: map[string]string{}}
}

func (s *stats) fail(route, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[route]++
	if _, ok := s.sample[route]; !ok {
		s.sample[route] = why
	}
}

// do sends one request and records it; it returns the body and whether
// the status was want.
func (s *stats) do(c *http.Client, route, method, url, token, ctype string, body []byte, want int) ([]byte, bool) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		s.fail(route, err.Error())
		return nil, false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		s.fail(route, err.Error())
		return nil, false
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	s.mu.Lock()
	s.lat[route] = append(s.lat[route], d)
	s.mu.Unlock()
	if err != nil || resp.StatusCode != want {
		s.fail(route, fmt.Sprintf("%d %.200s %v", resp.StatusCode, b, err))
		return b, false
	}
	return b, true
}

func (s *stats) report(out io.Writer, elapsed time.Duration) (total, errs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(out, "\n%-8s %9s %9s %9s %9s %7s\n", "route", "requests", "req/s", "p50", "p99", "errors")
	for _, r := range []string{"upload", "list", "content", "ack"} {
		ds := s.lat[r]
		slices.Sort(ds)
		pct := func(p float64) time.Duration {
			if len(ds) == 0 {
				return 0
			}
			return ds[int(float64(len(ds)-1)*p)]
		}
		fmt.Fprintf(out, "%-8s %9d %9.0f %8.2fms %8.2fms %7d\n", r, len(ds), float64(len(ds))/elapsed.Seconds(),
			float64(pct(0.5).Microseconds())/1e3, float64(pct(0.99).Microseconds())/1e3, s.errs[r])
		total += len(ds)
		errs += s.errs[r]
		if why, ok := s.sample[r]; ok {
			fmt.Fprintf(out, "         first %s error: %s\n", r, why)
		}
	}
	return total, errs
}
