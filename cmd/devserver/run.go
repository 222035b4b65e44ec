package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/awsprofile"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/localpg"
	"github.com/pendinguploads/pendinguploads/internal/locals3"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/sweep"
	"github.com/pendinguploads/pendinguploads/migrations"
)

// SweepInterval is the template's shortest SweepEvery, rate(5 minutes): a
// dev server shows the sweep's work soon (production's default is hourly).
const SweepInterval = 5 * time.Minute

// localDB is the database the dev server's own cluster serves.
const localDB = "pendinguploads"

// localBucket is the bucket LOCAL_S3 creates when CONTENT_BUCKET is unset.
const localBucket = "uploads"

// checkTimeout bounds each check at start (the database, the bucket).
const checkTimeout = 15 * time.Second

// startError is a start that cannot go on: a setting at fault and what to
// do, for a person to read (not a log line).
type startError struct {
	setting string // the variable at fault, or what failed
	msg     string // what is wrong and how to fix it
}

func (e *startError) Error() string { return e.setting + ": " + e.msg }

func startErrorf(setting, format string, args ...any) error {
	return &startError{setting: setting, msg: fmt.Sprintf(format, args...)}
}

// run is the dev server; ready, when not nil, receives the listening
// address (tests use it). It returns the process's exit status.
func run(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer, ready chan<- string) int {
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(stderr, nil)))
	code, err := serve(ctx, getenv, stdout, log, ready)
	if err != nil {
		// A line for a person, not a log record: most are start-up
		// mistakes, and name the setting and the fix.
		fmt.Fprintf(stderr, "devserver: %v\n", err)
	}
	return code
}

// serve starts everything, serves until ctx ends, and stops what it
// started, in reverse order: the port (and the example page's), the
// local dependencies, the service, its workspace, then the servers.
func serve(ctx context.Context, getenv func(string) string, stdout io.Writer, log *slog.Logger, ready chan<- string) (int, error) {
	d := &devRun{getenv: getenv, stdout: stdout, log: log, env: map[string]string{}}
	defer d.stop()
	if err := d.listen(); err != nil {
		return 1, err
	}
	if err := d.startDependencies(ctx); err != nil {
		return 1, err
	}
	a, cfg, err := d.openService(ctx)
	if err != nil {
		return 1, err
	}
	ws, wsToken, err := d.workspace(ctx, a)
	if err != nil {
		return 1, err
	}
	return d.serveUntilDone(ctx, a, cfg, ws, wsToken, ready)
}

// devRun is one run of the dev server while it starts: the settings it
// supplies on top of the environment, what it started, and the stops of
// what it started (run by stop, last first).
type devRun struct {
	getenv  func(string) string
	stdout  io.Writer
	log     *slog.Logger
	env     map[string]string // settings the dev server supplies
	st      started
	page    examples
	ln      net.Listener
	loadAWS func(context.Context, *slog.Logger) (aws.Config, error)
	adminTk string
	stops   []func()
}

// lookup is a setting: the dev server's own, else the environment's.
func (d *devRun) lookup(k string) string {
	if v, ok := d.env[k]; ok {
		return v
	}
	return d.getenv(k)
}

// onStop adds f to what stop runs.
func (d *devRun) onStop(f func()) { d.stops = append(d.stops, f) }

// stop stops what the run started, last first.
func (d *devRun) stop() {
	for i := len(d.stops) - 1; i >= 0; i-- {
		d.stops[i]()
	}
}

// listen takes LOCAL_DIR, the port (first: nothing else starts for a port
// that is taken), and the example page's port, whose origin the API's
// CORS and the local bucket's must list before the settings are read.
func (d *devRun) listen() error {
	dir := d.getenv("LOCAL_DIR")
	if dir == "" {
		dir = ".local"
	}
	localDir, err := filepath.Abs(dir)
	if err != nil {
		return startErrorf("LOCAL_DIR", "%v", err)
	}
	d.st.localDir = localDir
	port := d.getenv("PORT")
	if port == "" {
		port = "8080"
	}
	if d.ln, err = listen(d.getenv("HOST"), port); err != nil {
		return err
	}
	d.onStop(func() { d.ln.Close() })
	if d.page.root = examplesRoot(); d.page.root != "" {
		if d.page.ln, err = listenExamples(d.getenv, d.ln.Addr()); err != nil {
			return err
		}
	}
	if d.page.ln != nil {
		d.onStop(func() { d.page.ln.Close() })
		d.page.origin = pageOrigin(d.page.ln)
		if d.getenv("CORS_ALLOWED_ORIGINS") == "" {
			d.env["CORS_ALLOWED_ORIGINS"] = d.page.origin
			d.page.corsSupplied = true
		}
		d.page.corsListed = listsOrigin(d.lookup("CORS_ALLOWED_ORIGINS"), d.page.origin)
	}
	return nil
}

// startDependencies starts what the settings leave to the dev server: a
// local S3 (LOCAL_S3), a local Postgres (no DATABASE_URL nor
// DB_SECRET_ARN), and an admin token and a download link key kept in
// LOCAL_DIR (none given).
func (d *devRun) startDependencies(ctx context.Context) error {
	var err error
	d.loadAWS = awsprofile.Load
	if d.st.localS3, err = localS3Wanted(d.getenv); err != nil {
		return err
	}
	if d.st.localS3 {
		stop, err := startLocalS3(d.stdout, d.getenv, d.env)
		if err != nil {
			return err
		}
		d.onStop(stop)
		d.st.s3URL = d.env["S3_ENDPOINT"]
		// The dummy credentials, whatever the person's AWS profile says.
		d.loadAWS = func(_ context.Context, log *slog.Logger) (aws.Config, error) { return awsenv.Load(d.lookup, log) }
	}
	if d.getenv("DATABASE_URL") == "" && d.getenv("DB_SECRET_ARN") == "" {
		stop, err := startLocalPostgres(ctx, d.stdout, d.st.localDir, d.env, &d.st)
		if err != nil {
			return err
		}
		d.onStop(stop)
	}
	if err := d.startClamd(ctx); err != nil {
		return err
	}
	d.adminTk = d.lookup("ADMIN_TOKEN")
	if d.adminTk == "" && d.lookup("ADMIN_TOKEN_SECRET_ARN") == "" {
		if d.adminTk, d.st.adminKept, err = keptAdminToken(d.st.localDir); err != nil {
			return startErrorf("LOCAL_DIR", "admin token: %v", err)
		}
		d.env["ADMIN_TOKEN"] = d.adminTk
	}
	if d.lookup("DOWNLOAD_LINK_KEY") == "" && d.lookup("DOWNLOAD_LINK_KEY_SECRET_ARN") == "" {
		// Kept beside the admin token, as the stack keeps its key across
		// deploys: a link minted before a restart opens after it.
		if d.env["DOWNLOAD_LINK_KEY"], _, err = keptLinkKey(d.st.localDir); err != nil {
			return startErrorf("LOCAL_DIR", "download link key: %v", err)
		}
	}
	return nil
}

// openService reads the configuration, opens the service over it, checks
// the database and the bucket, and migrates the schema.
func (d *devRun) openService(ctx context.Context) (*app.App, config.Config, error) {
	cfg, err := config.Load(d.lookup, config.NeedDatabase|config.NeedAdminToken|config.NeedLinkKey)
	if err != nil {
		return nil, cfg, err
	}
	a, err := app.New(ctx, cfg, app.Options{Logger: d.log, MaxConns: 8, OpenBucket: s3blobs.OpenBucket, LoadAWS: d.loadAWS})
	if err != nil {
		return nil, cfg, err
	}
	d.onStop(a.Close)
	if err := checkDatabase(ctx, a, d.st.ownDB != ""); err != nil {
		return nil, cfg, err
	}
	if cfg.ContentBucket != "" {
		if err := prepareBucket(ctx, cfg, d.loadAWS, d.log, d.st.localS3); err != nil {
			return nil, cfg, err
		}
	}
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = migrations.Up(mctx, a.DatabaseURL)
	cancel()
	if err != nil {
		return nil, cfg, fmt.Errorf("migrate: %w", err)
	}
	if d.st.reused {
		if d.st.earlier, err = earlierData(ctx, a.Pool, a.Store, d.st.localS3); err != nil {
			return nil, cfg, fmt.Errorf("earlier data: %w", err)
		}
	}
	return a, cfg, nil
}

// workspace is the dev workspace (DEV_WORKSPACE_ID, or the last run's,
// or a new one) and a fresh token of it; none with a database of the
// person's own and no DEV_WORKSPACE_ID.
func (d *devRun) workspace(ctx context.Context, a *app.App) (uuid.UUID, string, error) {
	ws, err := devWorkspace(ctx, a.Pool, d.getenv("DEV_WORKSPACE_ID"), d.st.localDir, d.st.ownDB != "")
	if err != nil {
		return uuid.Nil, "", startErrorf("DEV_WORKSPACE_ID", "%v", err)
	}
	var wsToken string
	if ws != uuid.Nil {
		if wsToken, _, err = admin.CreateToken(ctx, a.Pool, ws); err != nil {
			return uuid.Nil, "", fmt.Errorf("workspace token: %w", err)
		}
	}
	return ws, wsToken, nil
}

// serveUntilDone prints the banner, serves the API, the example page and
// the broker, and sweeps on schedule, until ctx ends or the server
// fails; then shuts the API down within 10 s.
func (d *devRun) serveUntilDone(ctx context.Context, a *app.App, cfg config.Config, ws uuid.UUID, wsToken string, ready chan<- string) (int, error) {
	srv := &http.Server{
		Handler:           reqlog.Middleware(a.API.Mux(), d.log),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // a 25 MiB body on a slow link
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	printBanner(d.stdout, banner{
		base: "http://" + hostForURL(d.ln.Addr().String()), adminToken: d.adminTk,
		adminGenerated: d.env["ADMIN_TOKEN"] != "", ws: ws, wsToken: wsToken, cfg: cfg, started: d.st, page: d.page,
	})
	if d.page.ln != nil {
		ps := exampleServer(d.page.root)
		go func() { _ = ps.Serve(d.page.ln) }()
		d.onStop(func() { ps.Close() })
	}
	stopPush, err := startPush(a, d.lookup, d.ln.Addr(), d.stdout, d.log)
	if err != nil {
		return 1, err
	}
	d.onStop(stopPush)

	if err := d.scanLoop(ctx, a, cfg); err != nil {
		return 1, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweepLoop(ctx, a, d.log)
	}()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(d.ln) }()
	if ready != nil {
		ready <- d.ln.Addr().String()
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(d.stdout, "\nStopping...")
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return 1, fmt.Errorf("serve: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-done
	return 0, nil
}

// examples is the example page's server, for the banner.
type examples struct {
	root         string       // the repository root it serves from; "" for no page
	ln           net.Listener // nil: no page
	origin       string
	corsSupplied bool // CORS_ALLOWED_ORIGINS was unset, and is the page's origin
	corsListed   bool // CORS_ALLOWED_ORIGINS lists the page's origin
}

// started is what the dev server started or found, for the banner.
type started struct {
	localDir  string
	localS3   bool   // LOCAL_S3: a moto_server of its own
	s3URL     string // its endpoint
	ownDB     string // the URL of its own Postgres; "" with DATABASE_URL
	reused    bool   // its own Postgres held the database already
	adminKept bool   // the admin token was read from LOCAL_DIR, not made now
	earlier   earlier
}

// localS3Wanted reads LOCAL_S3; unset, MALWARE_SCAN=clamav without a
// bucket of the person's own wants one too (the scanner reads objects).
func localS3Wanted(getenv func(string) string) (bool, error) {
	v := getenv("LOCAL_S3")
	if v == "" {
		return getenv("MALWARE_SCAN") == config.ScanClamAV && getenv("CONTENT_BUCKET") == "" && getenv("S3_ENDPOINT") == "", nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, startErrorf("LOCAL_S3", "want true or false (1 or 0), got %q", v)
	}
	if on && getenv("S3_ENDPOINT") != "" {
		return false, startErrorf("LOCAL_S3", "starts a local S3 at an endpoint of its own: unset S3_ENDPOINT (%s), or unset LOCAL_S3 to use that endpoint", getenv("S3_ENDPOINT"))
	}
	return on, nil
}

// sweepLoop sweeps once at start and then every SweepInterval, as the
// schedule does in production; a failed sweep is logged and retried on the
// next tick.
func sweepLoop(ctx context.Context, a *app.App, log *slog.Logger) {
	t := time.NewTicker(SweepInterval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, _ = sweep.Run(sctx, a.Store, a.Config.AckRetention, log, a.Metrics)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// hostForURL turns a listening address into one a client can dial.
func hostForURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// startLocalS3 starts moto for LOCAL_S3 and points the settings (env) at
// it: its endpoint, its dummy credentials, and the bucket unless
// CONTENT_BUCKET names one. Stop it with stop.
func startLocalS3(stdout io.Writer, getenv func(string) string, env map[string]string) (stop func(), err error) {
	fmt.Fprintln(stdout, "Starting a local S3 (moto_server, LOCAL_S3 is set)...")
	srv, err := locals3.Start(locals3.Options{})
	if errors.Is(err, locals3.ErrNotInstalled) {
		return nil, startErrorf("LOCAL_S3", "moto_server is not on PATH: install it (pip install 'moto[server]'), or run without a bucket (make run)")
	}
	if err != nil {
		return nil, startErrorf("LOCAL_S3", "%v", err)
	}
	env["S3_ENDPOINT"], env["S3_FORCE_PATH_STYLE"] = srv.URL(), "true"
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_SESSION_TOKEN"] = locals3.AccessKeyID, locals3.SecretAccessKey, ""
	env["AWS_REGION"] = locals3.Region
	if getenv("CONTENT_BUCKET") == "" {
		env["CONTENT_BUCKET"] = localBucket
	}
	return srv.Stop, nil
}

// startLocalPostgres starts the dev server's own Postgres under localDir
// (DATABASE_URL unset), creates its database, and points DATABASE_URL
// (env) at it; st learns whether it is the data of an earlier run. Stop
// it with stop.
func startLocalPostgres(ctx context.Context, stdout io.Writer, localDir string, env map[string]string, st *started) (stop func(), err error) {
	pgDir := filepath.Join(localDir, "pg")
	fmt.Fprintf(stdout, "Starting a local Postgres in %s (DATABASE_URL is unset)...\n", pgDir)
	cluster, err := localpg.Start(ctx, localpg.Options{Dir: pgDir})
	var inUse *localpg.InUseError
	if errors.As(err, &inUse) {
		return nil, startErrorf("LOCAL_DIR", "another dev server's Postgres (pid %d, port %d) already runs on %s: is make run already running in this clone? "+
			"Stop it (Ctrl-C where it runs), or give this one a folder and a port of its own: LOCAL_DIR=.local-2 PORT=8081 make run",
			inUse.PID, inUse.Port, pgDir)
	}
	if err != nil {
		return nil, startErrorf("local Postgres", "%v", err)
	}
	created, err := ensureDatabase(ctx, cluster.URL("postgres"), localDB)
	if err != nil {
		cluster.Stop()
		return nil, startErrorf("local Postgres", "%v", err)
	}
	env["DATABASE_URL"] = cluster.URL(localDB)
	st.ownDB = cluster.URL(localDB)
	st.reused = !cluster.Created() && !created
	return cluster.Stop, nil
}
