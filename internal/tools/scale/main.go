// Command scale (make scale) measures what issue 41 asks of the service at
// scale, in one run, on a throwaway Postgres of its own (package localpg;
// or -database-url, a server it may create databases on):
//
//   - three tables of -sizes rows (10k, 1M, 5M by default), each seeded
//     with generate_series (indexes dropped first and built after, then
//     VACUUM ANALYZE) with a realistic mix: thousands of workspaces, rows
//     pending, acked within the retention, expired and not yet swept,
//     inline and bucket-held (s3_key set: the keys point at no bucket,
//     only the database's cost is measured);
//   - in each, the same measured workspaces: one with 10 files waiting,
//     one with about 10k, one at its quota (10,000 files), one with 10
//     waiting beside 10k expired and unswept;
//   - rounds interleaved across the sizes: an upload at 10 and at 10k
//     pending (each acked after), a refusal when full, the list with and
//     without expired rows, an ack, the backlog report, through the real
//     service (internal/app's store and HTTP API on a loopback server,
//     the dev server's wiring) and the database time of each request (a
//     pgx tracer on the service's pool);
//   - fairness, on the largest size: other workspaces' uploads and lists
//     on a quiet server, then beside 50 concurrent uploads into the
//     workspace at its quota;
//   - the sweep, on the middle size: -sweep-small then -sweep-large
//     eligible rows (half acked past the retention, half expired; one in
//     seven bucket-held, deleted through a no-op bucket), each batch
//     timed, within the sweep function's timeout (template.yaml, 120 s,
//     less lambdafn.Margin) and resumed when it stops;
//   - EXPLAIN (ANALYZE, BUFFERS) of each statement on those paths, as the
//     service sent it (DML in a transaction rolled back).
//
// It prints each ratio of the Goal against its goal, PASS or FAIL
// (the exit status is 0 either way: it measures, it does not gate). The
// numbers are medians of each measurement's samples; on a shared machine
// they move between runs. Not part of make test.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/localpg"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/migrations"
)

// The measured workspaces, the same in every table.
var (
	wsSmall   = uuid.MustParse("5ca1e000-0000-4000-8000-000000000010") // 10 waiting
	wsBig     = uuid.MustParse("5ca1e000-0000-4000-8000-000000009800") // 9,800 waiting
	wsFull    = uuid.MustParse("5ca1e000-0000-4000-8000-000000010000") // 10,000 waiting: the quota
	wsExpired = uuid.MustParse("5ca1e000-0000-4000-8000-00000000e000") // 10 waiting, 10k expired unswept
)

const (
	bigPending     = 9800
	quotaFiles     = config.DefaultWorkspaceMaxPendingFiles
	expiredUnswept = 10_000
	fairWriters    = 50
	fairOthers     = 8
	// sweepTimeout is the sweep function's timeout in template.yaml.
	sweepTimeout = 120 * time.Second
	maxRows      = 20_000_000 // bounds -sizes and -sweep-*
)

type options struct {
	sizes       []int
	sweepSmall  int
	sweepLarge  int
	rounds      int
	samples     int
	fairFor     time.Duration
	databaseURL string
	explain     bool
}

func main() {
	var o options
	sizes := flag.String("sizes", "10k,1m,5m", "table sizes, comma-separated (k, m suffixes)")
	small := flag.String("sweep-small", "100k", "eligible rows of the first timed sweep")
	large := flag.String("sweep-large", "1m", "eligible rows of the second (10× the first for the goal)")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds over the sizes")
	flag.IntVar(&o.samples, "samples", 15, "samples of each measurement per round and size")
	flag.DurationVar(&o.fairFor, "fair-for", 5*time.Second, "each fairness phase's length")
	flag.StringVar(&o.databaseURL, "database-url", "", "a Postgres server to create the databases on (default: a throwaway one)")
	flag.BoolVar(&o.explain, "explain", true, "print EXPLAIN (ANALYZE, BUFFERS) of each statement")
	flag.Parse()
	var err error
	if o.sizes, err = parseCounts(*sizes); err == nil {
		o.sweepSmall, err = parseCount(*small)
	}
	if err == nil {
		o.sweepLarge, err = parseCount(*large)
	}
	if err == nil && (o.rounds < 1 || o.rounds > 20 || o.samples < 1 || o.samples > 1000 || o.fairFor <= 0 || o.fairFor > time.Minute) {
		err = errors.New("-rounds 1-20, -samples 1-1000, -fair-for up to 1m")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Hour) // the whole run, bounded
	defer cancel()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := parseCount(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func parseCount(s string) (int, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1000, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1_000_000, strings.TrimSuffix(s, "m")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n*mult > maxRows {
		return 0, fmt.Errorf("count %q: want 1 to %d (k, m suffixes)", s, maxRows)
	}
	return n * mult, nil
}

func label(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// target is one table size: its database, the service on it, and its
// samples.
type target struct {
	size    int
	url     string
	app     *app.App
	timer   *dbTimer
	base    string
	srv     *http.Server
	samples map[string][]sample
}

type sample struct{ wall, db time.Duration }

func run(ctx context.Context, o options, out io.Writer) error {
	start := time.Now()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(out, "make scale: %s, sizes %v, sweep %s then %s eligible, %d rounds × %d samples; load average at start: %s\n",
		start.UTC().Format(time.RFC3339), o.sizes, label(o.sweepSmall), label(o.sweepLarge), o.rounds, o.samples, strings.TrimSpace(string(load)))
	serverURL := o.databaseURL
	if serverURL == "" {
		dir, err := os.MkdirTemp("", "scale-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o755); err != nil { // as root, the cluster runs as postgres
			return err
		}
		cluster, err := localpg.Start(ctx, localpg.Options{Dir: filepath.Join(dir, "pg"), Fast: true})
		if err != nil {
			return err
		}
		defer cluster.Stop()
		serverURL = cluster.URL("postgres")
	}
	admin := "scale_admin_token_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	var targets []*target
	defer func() {
		for _, t := range targets {
			t.close()
		}
	}()
	for _, n := range o.sizes {
		t, err := newTarget(ctx, serverURL, n, admin, out)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, Proxy: nil}}
	h := &httpc{client: client, admin: admin}
	fmt.Fprintf(out, "\n== interleaved: %d rounds over %d sizes (%s)\n", o.rounds, len(targets), time.Since(start).Round(time.Second))
	for r := 0; r < o.rounds; r++ {
		for _, t := range targets {
			if err := t.round(ctx, h, o.samples); err != nil {
				return fmt.Errorf("%s: %w", label(t.size), err)
			}
		}
	}
	report(out, targets)

	// The explained requests first, then the sweep, then fairness: the
	// busy phase leaves requests queued in the server behind its
	// workspace's lock after its clients gave up.
	largest, middle := targets[len(targets)-1], targets[len(targets)/2]
	var ex bytes.Buffer
	if o.explain {
		if err := explainPaths(ctx, &ex, largest, h); err != nil {
			return fmt.Errorf("explain: %w", err)
		}
	}
	if err := sweepRun(ctx, out, &ex, middle, o); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := fairness(ctx, out, largest, h, o.fairFor); err != nil {
		return fmt.Errorf("fairness: %w", err)
	}
	if o.explain {
		fmt.Fprintf(out, "\n== EXPLAIN (ANALYZE, BUFFERS), %s rows (the sweep's on %s)\n%s", label(largest.size), label(middle.size), ex.String())
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Fprintf(out, "\nmake scale: done in %s; load average at the end: %s\n", time.Since(start).Round(time.Second), strings.TrimSpace(string(load)))
	return nil
}

// newTarget creates and seeds the database of n rows and starts the
// service on it.
func newTarget(ctx context.Context, serverURL string, n int, admin string, out io.Writer) (*target, error) {
	name := "scale_" + strings.ToLower(label(n))
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, err
	}
	_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name)
	_, err = conn.Exec(ctx, `CREATE DATABASE `+name)
	_ = conn.Close(ctx)
	if err != nil {
		return nil, err
	}
	cfgURL, err := withDatabase(serverURL, name)
	if err != nil {
		return nil, err
	}
	if err := migrations.Up(ctx, cfgURL); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	t0 := time.Now()
	pool, err := pgxpool.New(ctx, cfgURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if err := seed(ctx, pool, n); err != nil {
		return nil, fmt.Errorf("seed %s: %w", label(n), err)
	}
	var total int64
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM pending_uploads`).Scan(&total)
	fmt.Fprintf(out, "seeded %s: %d rows in %s\n", name, total, time.Since(t0).Round(time.Millisecond))

	t := &target{size: n, url: cfgURL, timer: &dbTimer{}, samples: map[string][]sample{}}
	// The seeded workspaces have no tokens: the admin stages for them, as
	// on the platform's database (ACCEPT_UNKNOWN_WORKSPACES).
	env := map[string]string{"DATABASE_URL": cfgURL, "ADMIN_TOKEN": admin, "ACCEPT_UNKNOWN_WORKSPACES": "true"}
	cfg, err := config.Load(func(k string) string { return env[k] }, config.NeedDatabase|config.NeedAdminToken)
	if err != nil {
		return nil, err
	}
	t.app, err = app.New(ctx, cfg, app.Options{MaxConns: 8, Tracer: t.timer,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t.base = "http://" + ln.Addr().String()
	t.srv = &http.Server{Handler: t.app.API.Mux(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *target) close() {
	if t.srv != nil {
		_ = t.srv.Close()
	}
	if t.app != nil {
		t.app.Close()
	}
}

func withDatabase(serverURL, db string) (string, error) {
	cfg, err := pgx.ParseConfig(serverURL)
	if err != nil {
		return "", err
	}
	i := strings.LastIndex(serverURL, "/"+cfg.Database)
	if i < 0 {
		return "", fmt.Errorf("cannot find the database in the URL")
	}
	return serverURL[:i] + "/" + db + serverURL[i+len(cfg.Database)+1:], nil
}

// seed fills pending_uploads with n background rows and the measured
// workspaces, indexes dropped before and built after.
func seed(ctx context.Context, pool *pgxpool.Pool, n int) error {
	workspaces := max(n/500, 20)
	return bulk(ctx, pool, func(c *pgxpool.Conn) error {
		// g % 100: 0-49 acked 5-55 minutes ago (inside ACK_RETENTION), 50-97
		// waiting (staged within 20 h), 98-99 expired and unswept; one in
		// seven bucket-held.
		if _, err := c.Exec(ctx, `
			INSERT INTO pending_uploads (workspace_id, content, s3_key, size_bytes, filename, mimetype, created_at, acked_at, expires_at)
			SELECT ws, CASE WHEN g % 7 = 0 THEN NULL ELSE $3::bytea END,
			       CASE WHEN g % 7 = 0 THEN 'objects/' || ws || '/' || md5(g::text) END,
			       1000 + (g * 7919) % 200000, 'f' || g || '.bin', 'application/octet-stream',
			       created,
			       CASE WHEN g % 100 < 50 THEN now() - make_interval(secs => 300 + (g * 13) % 3000) END,
			       CASE WHEN g % 100 >= 98 THEN now() - make_interval(secs => 1 + g % 3600) ELSE created + interval '24 hours' END
			FROM (SELECT g, ('00000000-0000-4000-8000-' || lpad(to_hex(g % $2), 12, '0'))::uuid AS ws,
			             now() - make_interval(secs => 3600 + (g * 37) % 72000) AS created
			      FROM generate_series(1, $1::bigint) g) s`, n, workspaces, bytes.Repeat([]byte("x"), 200)); err != nil {
			return err
		}
		for _, w := range []struct {
			ws      uuid.UUID
			n       int
			expired bool
		}{{wsSmall, 10, false}, {wsBig, bigPending, false}, {wsFull, quotaFiles, false}, {wsExpired, 10, false}, {wsExpired, expiredUnswept, true}} {
			created, exp := `now() - make_interval(secs => 3600 + g)`, `now() + interval '20 hours'`
			if w.expired {
				// Expired as production's rows expire: staged with the
				// deployment's TTL (24 h), that long before expires_at.
				created, exp = `now() - interval '24 hours' - make_interval(secs => g)`, `now() - make_interval(secs => g)`
			}
			if _, err := c.Exec(ctx, `
				INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, created_at, expires_at)
				SELECT $1, $2::bytea, 1000, 'm' || g || '.bin', `+created+`, `+exp+`
				FROM generate_series(1, $3::int) g`, w.ws, bytes.Repeat([]byte("x"), 200), w.n); err != nil {
				return err
			}
		}
		return nil
	})
}

// bulk runs insert with pending_uploads' indexes dropped, then builds them
// again (their definitions as the migrations left them) and runs VACUUM
// ANALYZE.
func bulk(ctx context.Context, pool *pgxpool.Pool, insert func(*pgxpool.Conn) error) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	if _, err := c.Exec(ctx, `SET maintenance_work_mem = '256MB'`); err != nil {
		return err
	}
	rows, err := c.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
		WHERE tablename = 'pending_uploads' AND indexname <> 'pending_uploads_pkey' ORDER BY indexname`)
	if err != nil {
		return err
	}
	var names, defs []string
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			return err
		}
		names, defs = append(names, n), append(defs, d)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range names {
		if _, err := c.Exec(ctx, `DROP INDEX `+pgx.Identifier{n}.Sanitize()); err != nil {
			return err
		}
	}
	if _, err := c.Exec(ctx, `ALTER TABLE pending_uploads DROP CONSTRAINT pending_uploads_pkey`); err != nil {
		return err
	}
	if err := insert(c); err != nil {
		return err
	}
	// The rows were written by hand: their workspaces' running totals
	// (pending_upload_totals, which the quota reads) recounted, as
	// pendingctl recount --all would.
	if _, err := c.Exec(ctx, `
		INSERT INTO pending_upload_totals (workspace_id, files, bytes, max_ttl)
		SELECT workspace_id, count(*), sum(size_bytes), max(expires_at - created_at) FROM pending_uploads WHERE acked_at IS NULL GROUP BY 1
		ON CONFLICT (workspace_id) DO UPDATE SET files = excluded.files, bytes = excluded.bytes, max_ttl = excluded.max_ttl`); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, `ALTER TABLE pending_uploads ADD PRIMARY KEY (file_id)`); err != nil {
		return err
	}
	for _, d := range defs {
		if _, err := c.Exec(ctx, d); err != nil {
			return err
		}
	}
	_, err = c.Exec(ctx, `VACUUM ANALYZE pending_uploads`)
	return err
}

// dbTimer is the service pool's tracer: the database time of its
// statements (each statement's, or batch's, start to end), and, when
// capturing, the statements themselves.
type dbTimer struct {
	mu        sync.Mutex
	total     time.Duration
	capturing bool
	captured  []stmt
}

type stmt struct {
	sql  string
	args []any
}

type startKey struct{}

func (d *dbTimer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	d.capture(data.SQL, data.Args)
	return context.WithValue(ctx, startKey{}, time.Now())
}

func (d *dbTimer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	d.end(ctx)
}

func (d *dbTimer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, startKey{}, time.Now())
}

func (d *dbTimer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	d.capture(data.SQL, data.Args)
}

func (d *dbTimer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	d.end(ctx)
}

func (d *dbTimer) capture(sql string, args []any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capturing && len(d.captured) < 64 {
		d.captured = append(d.captured, stmt{sql, args})
	}
}

func (d *dbTimer) end(ctx context.Context) {
	if t, ok := ctx.Value(startKey{}).(time.Time); ok {
		d.mu.Lock()
		d.total += time.Since(t)
		d.mu.Unlock()
	}
}

func (d *dbTimer) now() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

func (d *dbTimer) startCapture() {
	d.mu.Lock()
	d.capturing, d.captured = true, nil
	d.mu.Unlock()
}

func (d *dbTimer) stopCapture() []stmt {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capturing = false
	return d.captured
}

// httpc is the client of the service: the admin token acts for every
// workspace.
type httpc struct {
	client *http.Client
	admin  string
}

func (h *httpc) do(ctx context.Context, method, url, ctype string, body []byte, want int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+h.admin)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return b, fmt.Errorf("%s %s: %d, want %d: %.200s", method, url, resp.StatusCode, want, b)
	}
	return b, nil
}

var fileBody, fileType = func() ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	pw, _ := mw.CreateFormFile("files", "scale.bin")
	_, _ = pw.Write(bytes.Repeat([]byte("s"), 1024))
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}()

// upload stages one 1 KiB file in ws and returns its id.
func (h *httpc) upload(ctx context.Context, base string, ws uuid.UUID, want int) (string, error) {
	b, err := h.do(ctx, "POST", base+"/workspaces/"+ws.String()+"/chat/uploads", fileType, fileBody, want)
	if err != nil || want != http.StatusOK {
		return "", err
	}
	var r struct {
		Files []struct {
			FileID string `json:"file_id"`
		} `json:"files"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Files) != 1 {
		return "", fmt.Errorf("upload answer %.200s: %v", b, err)
	}
	return r.Files[0].FileID, nil
}

func (h *httpc) ack(ctx context.Context, base string, ws uuid.UUID, id string) error {
	_, err := h.do(ctx, "POST", base+"/workspaces/"+ws.String()+"/pending-uploads/"+id+"/ack", "", nil, http.StatusOK)
	return err
}

func (h *httpc) list(ctx context.Context, base string, ws uuid.UUID) error {
	_, err := h.do(ctx, "GET", base+"/workspaces/"+ws.String()+"/pending-uploads", "", nil, http.StatusOK)
	return err
}

// timed runs f and records its wall and database time under name.
func (t *target) timed(name string, f func() error) error {
	db0, t0 := t.timer.now(), time.Now()
	err := f()
	t.samples[name] = append(t.samples[name], sample{time.Since(t0), t.timer.now() - db0})
	return err
}

// The measurements of a round.
const (
	mUpload10   = "upload at 10 pending"
	mUpload10k  = "upload at 9.8k pending"
	mRefused    = "refusal when full (409)"
	mList       = "list, 10 waiting"
	mListExpire = "list, 10 waiting + 10k expired"
	mAck        = "ack"
	mBacklog    = "backlog report (Store.Backlog)"
)

var measurements = []string{mUpload10, mUpload10k, mRefused, mList, mListExpire, mAck, mBacklog}

func (t *target) round(ctx context.Context, h *httpc, n int) error {
	for i := 0; i < n; i++ {
		var id string
		if err := t.timed(mUpload10, func() (err error) { id, err = h.upload(ctx, t.base, wsSmall, http.StatusOK); return err }); err != nil {
			return err
		}
		if err := t.timed(mAck, func() error { return h.ack(ctx, t.base, wsSmall, id) }); err != nil {
			return err
		}
		if err := t.timed(mUpload10k, func() (err error) { id, err = h.upload(ctx, t.base, wsBig, http.StatusOK); return err }); err != nil {
			return err
		}
		if err := h.ack(ctx, t.base, wsBig, id); err != nil {
			return err
		}
		if err := t.timed(mRefused, func() error { _, err := h.upload(ctx, t.base, wsFull, http.StatusConflict); return err }); err != nil {
			return err
		}
		if err := t.timed(mList, func() error { return h.list(ctx, t.base, wsSmall) }); err != nil {
			return err
		}
		if err := t.timed(mListExpire, func() error { return h.list(ctx, t.base, wsExpired) }); err != nil {
			return err
		}
		// The backlog report is the sweep's, not a request's: its time is
		// the Store call's, wall and database alike.
		if err := t.timed(mBacklog, func() error { _, err := t.app.Store.Backlog(ctx); return err }); err != nil {
			return err
		}
	}
	return nil
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (t *target) p50(name string, db bool) time.Duration {
	var d []time.Duration
	for _, s := range t.samples[name] {
		if db {
			d = append(d, s.db)
		} else {
			d = append(d, s.wall)
		}
	}
	return median(d)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// goal prints one ratio against its goal.
func goal(out io.Writer, what string, got, limit float64) {
	verdict := "PASS"
	if got > limit || got == 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(out, "%-4s %6.2f×  (goal ≤ %g×)  %s\n", verdict, got, limit, what)
}

func report(out io.Writer, targets []*target) {
	fmt.Fprintf(out, "\nmedians, wall (HTTP round trip on loopback) / database (the service pool's statement time):\n")
	fmt.Fprintf(out, "%-34s", "")
	for _, t := range targets {
		fmt.Fprintf(out, " %24s", label(t.size)+" rows")
	}
	fmt.Fprintln(out)
	for _, m := range measurements {
		fmt.Fprintf(out, "%-34s", m)
		for _, t := range targets {
			fmt.Fprintf(out, " %24s", ms(t.p50(m, false))+" / "+ms(t.p50(m, true)))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "\nratios against the goals (database time; per size):")
	for _, t := range targets {
		l := label(t.size)
		goal(out, fmt.Sprintf("%s: an upload's database cost at 9.8k pending / at 10", l), ratio(t.p50(mUpload10k, true), t.p50(mUpload10, true)), 1.5)
		goal(out, fmt.Sprintf("%s: the refusal when full / an upload at 10", l), ratio(t.p50(mRefused, true), t.p50(mUpload10, true)), 1.5)
		goal(out, fmt.Sprintf("%s: a list beside 10k expired unswept rows / beside none", l), ratio(t.p50(mListExpire, true), t.p50(mList, true)), 1.5)
	}
	if len(targets) > 1 {
		lo, hi := targets[0], targets[len(targets)-1]
		span := label(hi.size) + " / " + label(lo.size)
		goal(out, "a small workspace's list, "+span+" rows (wall)", ratio(hi.p50(mList, false), lo.p50(mList, false)), 1.15)
		goal(out, "a small workspace's upload, "+span+" rows (wall)", ratio(hi.p50(mUpload10, false), lo.p50(mUpload10, false)), 1.15)
		goal(out, "an ack, "+span+" rows (wall)", ratio(hi.p50(mAck, false), lo.p50(mAck, false)), 1.15)
		goal(out, fmt.Sprintf("the backlog report, %s / %s rows (bounded: independent of the table)", label(hi.size), label(lo.size)),
			ratio(hi.p50(mBacklog, false), lo.p50(mBacklog, false)), 1.5)
	}
}

// fairness: other workspaces' uploads and lists on a quiet server, then
// beside fairWriters concurrent uploads into the workspace at its quota.
func fairness(ctx context.Context, out io.Writer, t *target, h *httpc, d time.Duration) error {
	phase := func(busy bool) (ops float64, p90 time.Duration, writer int64, err error) {
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		var mu sync.Mutex
		var lat []time.Duration
		var firstErr error
		var wg sync.WaitGroup
		var written atomic.Int64
		fail := func(err error) {
			if err != nil && pctx.Err() == nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}
		for i := 0; i < fairOthers; i++ {
			ws := uuid.New()
			wg.Go(func() {
				for k := 0; pctx.Err() == nil && k < 100_000; k++ {
					t0 := time.Now()
					var err error
					if k%2 == 0 {
						_, err = h.upload(pctx, t.base, ws, http.StatusOK)
					} else {
						err = h.list(pctx, t.base, ws)
					}
					if pctx.Err() != nil {
						return
					}
					fail(err)
					mu.Lock()
					lat = append(lat, time.Since(t0))
					mu.Unlock()
				}
			})
		}
		if busy {
			for i := 0; i < fairWriters; i++ {
				wg.Go(func() {
					for k := 0; pctx.Err() == nil && k < 100_000; k++ {
						// At the quota: stored until it is full, then 409.
						_, err := h.do(pctx, "POST", t.base+"/workspaces/"+wsBig.String()+"/chat/uploads", fileType, fileBody, http.StatusOK)
						if err == nil {
							written.Add(1)
						} else if !strings.Contains(err.Error(), ": 409,") && !strings.Contains(err.Error(), ": 503,") {
							fail(err)
						}
					}
				})
			}
		}
		wg.Wait()
		return float64(len(lat)) / d.Seconds(), quantile(lat, 0.9), written.Load(), firstErr
	}
	fmt.Fprintf(out, "\n== fairness, %s rows: %d other workspaces uploading and listing for %s, quiet then beside %d concurrent uploads into one workspace at its quota\n",
		label(t.size), fairOthers, d, fairWriters)
	qOps, qP90, _, err := phase(false)
	if err != nil {
		return err
	}
	bOps, bP90, written, err := phase(true)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "quiet: %.1f requests/s, p90 %s; busy: %.1f requests/s, p90 %s; the busy workspace stored %d files\n",
		qOps, ms(qP90), bOps, ms(bP90), written)
	goal(out, "fairness: the others' throughput, quiet / busy", qOps/max(bOps, 0.001), 1.5)
	goal(out, "fairness: the others' p90, busy / quiet", ratio(bP90, qP90), 2)
	return nil
}

// explainPaths sends one upload, list, ack, refusal and backlog report,
// captures their statements, and explains each.
func explainPaths(ctx context.Context, ex io.Writer, t *target, h *httpc) error {
	pool, err := pgxpool.New(ctx, t.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	steps := []struct {
		name string
		do   func() ([]string, error) // the file ids it created
	}{
		{"upload at 9.8k pending", func() ([]string, error) {
			id, err := h.upload(ctx, t.base, wsBig, http.StatusOK)
			return []string{id}, err
		}},
		{"refusal when full", func() ([]string, error) {
			_, err := h.upload(ctx, t.base, wsFull, http.StatusConflict)
			return nil, err
		}},
		{"list, 10 waiting", func() ([]string, error) { return nil, h.list(ctx, t.base, wsSmall) }},
		{"list, 10 waiting + 10k expired", func() ([]string, error) { return nil, h.list(ctx, t.base, wsExpired) }},
		{"backlog report", func() ([]string, error) { _, err := t.app.Store.Backlog(ctx); return nil, err }},
	}
	var lastID string
	for _, s := range steps {
		t.timer.startCapture()
		ids, err := s.do()
		stmts := t.timer.stopCapture()
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			lastID = ids[0]
		}
		explainAll(ctx, ex, pool, s.name, stmts, ids)
	}
	// The ack, explained before it runs: captured from a first ack of
	// another file, then explained against the fresh one.
	t.timer.startCapture()
	err = h.ack(ctx, t.base, wsBig, lastID)
	stmts := t.timer.stopCapture()
	if err != nil {
		return err
	}
	explainAll(ctx, ex, pool, "ack (explained after it ran: the row is acked already)", stmts, nil)
	return nil
}

// explainAll explains stmts in order in one transaction that it rolls
// back, after deleting the rows ids (what the request created), so that
// each statement meets the table as the request did.
func explainAll(ctx context.Context, ex io.Writer, pool *pgxpool.Pool, name string, stmts []stmt, ids []string) {
	fmt.Fprintf(ex, "\n--- %s: %d statements\n", name, len(stmts))
	tx, err := pool.Begin(ctx)
	if err != nil {
		fmt.Fprintf(ex, "begin: %v\n", err)
		return
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM pending_uploads WHERE file_id = ANY($1::uuid[])`, ids); err != nil {
			fmt.Fprintf(ex, "undo: %v\n", err)
			return
		}
	}
	for i, s := range stmts {
		fmt.Fprintf(ex, "\n[%d] %s\n", i+1, oneLine(s.sql))
		if _, err := tx.Exec(ctx, "SAVEPOINT x"); err != nil {
			fmt.Fprintf(ex, "%v\n", err)
			return
		}
		lines, err := explain(ctx, tx, s)
		if err != nil {
			fmt.Fprintf(ex, "    (not explained: %v)\n", err)
			_, _ = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT x")
			continue
		}
		for _, l := range lines {
			fmt.Fprintf(ex, "    %s\n", clip(l))
		}
	}
}

// clip shortens a plan line (an id list runs to 40 kB).
func clip(l string) string {
	if len(l) > 240 {
		return l[:240] + " …"
	}
	return l
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func explain(ctx context.Context, q querier, s stmt) ([]string, error) {
	rows, err := q.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+s.sql, s.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, rows.Err()
}

func oneLine(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 400 {
		s = s[:400] + " …"
	}
	return s
}

// noBucket is the sweep's bucket when only the database's cost is
// measured: the seeded keys point at no object, each delete is a no-op.
type noBucket struct{ pendinguploads.Bucket }

func (noBucket) Delete(context.Context, []string) error { return nil }

func (noBucket) List(context.Context, string, int) ([]pendinguploads.Blob, error) { return nil, nil }

// batchTimer wraps the sweep's database: each batch timed from its select
// to the end of its delete, and the batches explainAt explained (ANALYZE,
// BUFFERS, the delete rolled back) before they run, and not timed.
type batchTimer struct {
	*pgxpool.Pool
	explainAt map[int]bool
	ex        io.Writer
	n         int
	start     time.Time
	explained bool
	pass      string
	// activityExplained: the activity retention batch was explained.
	activityExplained bool
	times             map[string][]time.Duration
}

func (b *batchTimer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if strings.Contains(sql, "SELECT file_id, s3_key") && strings.Contains(sql, "pending_uploads") {
		b.n++
		b.pass = "expired"
		if strings.Contains(sql, "acked_at IS NOT NULL") {
			b.pass = "acked"
		}
		b.explained = b.explainAt[b.n] && b.ex != nil
		if b.explained {
			b.explainOne(ctx, fmt.Sprintf("sweep batch %d (%s): its select", b.n, b.pass), stmt{sql, args})
		}
		b.start = time.Now()
	}
	return b.Pool.Query(ctx, sql, args...)
}

// QueryRow explains the first activity retention batch, where there is
// one (a standalone database).
func (b *batchTimer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if strings.Contains(sql, "DELETE FROM activity_logs") && b.ex != nil && !b.activityExplained {
		b.activityExplained = true
		b.explainOne(ctx, "activity retention batch (standalone database)", stmt{sql, args})
	}
	// A bucket batch's row delete (it returns its count): timed, or
	// explained, as Exec's were.
	if strings.Contains(sql, "DELETE FROM pending_uploads WHERE file_id = ANY") {
		if b.explained {
			b.explainOne(ctx, fmt.Sprintf("sweep batch %d (%s): its delete", b.n, b.pass), stmt{sql, args})
			return b.Pool.QueryRow(ctx, sql, args...)
		}
		return timedRow{b.Pool.QueryRow(ctx, sql, args...), func() { b.times[b.pass] = append(b.times[b.pass], time.Since(b.start)) }}
	}
	return b.Pool.QueryRow(ctx, sql, args...)
}

// timedRow calls done once its row is read.
type timedRow struct {
	pgx.Row
	done func()
}

func (r timedRow) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	r.done()
	return err
}

func (b *batchTimer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	isDelete := strings.Contains(sql, "DELETE FROM pending_uploads WHERE file_id = ANY")
	if isDelete && b.explained {
		b.explainOne(ctx, fmt.Sprintf("sweep batch %d (%s): its delete", b.n, b.pass), stmt{sql, args})
	}
	tag, err := b.Pool.Exec(ctx, sql, args...)
	if isDelete && !b.explained {
		b.times[b.pass] = append(b.times[b.pass], time.Since(b.start))
	}
	return tag, err
}

func (b *batchTimer) explainOne(ctx context.Context, name string, s stmt) {
	fmt.Fprintf(b.ex, "\n--- %s\n%s\n", name, oneLine(s.sql))
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		fmt.Fprintf(b.ex, "begin: %v\n", err)
		return
	}
	defer func() { _ = tx.Rollback(ctx) }()
	lines, err := explain(ctx, tx, s)
	if err != nil {
		fmt.Fprintf(b.ex, "    (not explained: %v)\n", err)
	}
	for _, l := range lines {
		fmt.Fprintf(b.ex, "    %s\n", clip(l))
	}
}

// sweepRun times two sweeps on t's table: o.sweepSmall then o.sweepLarge
// eligible rows, each within the sweep function's timeout, resumed when
// it stops.
func sweepRun(ctx context.Context, out, ex io.Writer, t *target, o options) error {
	pool, err := pgxpool.New(ctx, t.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Fprintf(out, "\n== the sweep, on the %s-row table (bucket-held rows through a no-op bucket: the database's cost only)\n", label(t.size))
	// What the interleaved rounds left eligible (the seed's expired rows,
	// the acked uploads) goes first, untimed.
	if _, err := pendinguploads.New(pool, noBucket{}, t.app.Store.Settings).Sweep(ctx, config.DefaultAckRetention); err != nil {
		return err
	}
	var took [2]time.Duration
	var batches [2]map[string][]time.Duration
	for i, n := range []int{o.sweepSmall, o.sweepLarge} {
		// Half acked past the retention, half expired, every workspace.
		if err := bulk(ctx, pool, func(c *pgxpool.Conn) error {
			_, err := c.Exec(ctx, `
				INSERT INTO pending_uploads (workspace_id, content, s3_key, size_bytes, filename, created_at, acked_at, expires_at)
				SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g % 2000), 12, '0'))::uuid,
				       CASE WHEN g % 7 = 0 THEN NULL ELSE $2::bytea END,
				       CASE WHEN g % 7 = 0 THEN 'objects/swept/' || md5(g::text) END,
				       1000, 'e' || g, now() - interval '30 hours',
				       CASE WHEN g % 2 = 0 THEN now() - interval '2 hours' - make_interval(secs => g % 20000) END,
				       now() - interval '6 hours' - make_interval(secs => g % 20000)
				FROM generate_series(1, $1::int) g`, n, bytes.Repeat([]byte("x"), 200))
			return err
		}); err != nil {
			return err
		}
		bt := &batchTimer{Pool: pool, times: map[string][]time.Duration{}}
		if i == 1 {
			mid := max(2, n/config.SweepBatch/4) // a quarter of the way into the acked pass
			bt.explainAt, bt.ex = map[int]bool{1: true, mid: true}, ex
		}
		s := pendinguploads.New(bt, noBucket{}, t.app.Store.Settings)
		t0 := time.Now()
		var res []string
		for run := 0; run < 3; run++ { // the schedule's next runs, bounded
			sctx, cancel := context.WithTimeout(ctx, sweepTimeout-lambdafn.Margin)
			r, err := s.Sweep(sctx, config.DefaultAckRetention)
			cancel()
			js, _ := json.Marshal(r)
			line := string(js)
			if err != nil {
				line += " error: " + err.Error()
			}
			res = append(res, line)
			var left int64
			// The seeded rows left (the background's acked rows cross the
			// retention meanwhile, and are not counted).
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pending_uploads WHERE filename LIKE 'e%'`).Scan(&left); err != nil {
				return err
			}
			if i == 1 && run == 0 {
				fmt.Fprintf(out, "%s eligible, first run (the function's %s timeout less %s): %s in %s; %d eligible rows left\n",
					label(n), sweepTimeout, lambdafn.Margin, line, time.Since(t0).Round(time.Millisecond), left)
				goalCleared(out, n, left)
			}
			if left == 0 {
				break
			}
		}
		took[i] = time.Since(t0)
		batches[i] = bt.times
		fmt.Fprintf(out, "%s eligible: swept in %s over %d run(s): %s\n", label(n), took[i].Round(time.Millisecond), len(res), strings.Join(res, "; "))
	}
	goal(out, fmt.Sprintf("the sweep: %s eligible / %s eligible, time (%.0f× the rows)", label(o.sweepLarge), label(o.sweepSmall),
		float64(o.sweepLarge)/float64(o.sweepSmall)), ratio(took[1], took[0]), 1.2*float64(o.sweepLarge)/float64(o.sweepSmall))
	for _, pass := range []string{"acked", "expired"} {
		b := batches[1][pass]
		if len(b) < 4 {
			fmt.Fprintf(out, "the %s pass: %d batches timed, too few to compare\n", pass, len(b))
			continue
		}
		k := min(10, len(b)/2)
		first, last := median(b[:k]), median(b[len(b)-k-1:len(b)-1]) // the final, short batch left out
		fmt.Fprintf(out, "the %s pass: %d batches, the first %d %s (median), the last %d %s, the slowest %s\n",
			pass, len(b), k, ms(first), k, ms(last), ms(slices.Max(b)))
		goal(out, fmt.Sprintf("the sweep's %s pass, %s eligible: its last batches / its first", pass, label(o.sweepLarge)), ratio(last, first), 1.5)
	}
	return nil
}

func goalCleared(out io.Writer, n int, left int64) {
	verdict := "PASS"
	what := "cleared within one invocation's timeout"
	if left > 0 {
		verdict = "(resumed)"
		what = fmt.Sprintf("not cleared in one invocation: %d left for the next run (the goal: cleared, or resumed and said so)", left)
	}
	fmt.Fprintf(out, "%-4s %s eligible %s\n", verdict, label(n), what)
}
