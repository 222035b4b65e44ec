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

// SweepInterval matches the production schedule, rate(5 minutes).
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
// started, in reverse order.
func serve(ctx context.Context, getenv func(string) string, stdout io.Writer, log *slog.Logger, ready chan<- string) (int, error) {
	env := map[string]string{} // settings the dev server supplies
	lookup := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return getenv(k)
	}
	dir := getenv("LOCAL_DIR")
	if dir == "" {
		dir = ".local"
	}
	localDir, err := filepath.Abs(dir)
	if err != nil {
		return 1, startErrorf("LOCAL_DIR", "%v", err)
	}

	// The port first: nothing else starts for a port that is taken.
	port := getenv("PORT")
	if port == "" {
		port = "8080"
	}
	ln, err := listen(getenv("HOST"), port)
	if err != nil {
		return 1, err
	}
	defer ln.Close()

	// The example page's origin, before the settings are read: the API's
	// CORS and the local bucket's must list it.
	var page examples
	if page.root = examplesRoot(); page.root != "" {
		if page.ln, err = listenExamples(getenv, ln.Addr()); err != nil {
			return 1, err
		}
	}
	if page.ln != nil {
		defer page.ln.Close()
		page.origin = pageOrigin(page.ln)
		if getenv("CORS_ALLOWED_ORIGINS") == "" {
			env["CORS_ALLOWED_ORIGINS"] = page.origin
			page.corsSupplied = true
		}
		page.corsListed = listsOrigin(lookup("CORS_ALLOWED_ORIGINS"), page.origin)
	}

	st := started{localDir: localDir}
	loadAWS := awsprofile.Load
	if st.localS3, err = localS3Wanted(getenv); err != nil {
		return 1, err
	}
	if st.localS3 {
		stop, err := startLocalS3(stdout, getenv, env)
		if err != nil {
			return 1, err
		}
		defer stop()
		st.s3URL = env["S3_ENDPOINT"]
		// The dummy credentials, whatever the person's AWS profile says.
		loadAWS = func(_ context.Context, log *slog.Logger) (aws.Config, error) { return awsenv.Load(lookup, log) }
	}

	if getenv("DATABASE_URL") == "" && getenv("DB_SECRET_ARN") == "" {
		stop, err := startLocalPostgres(ctx, stdout, localDir, env, &st)
		if err != nil {
			return 1, err
		}
		defer stop()
	}

	adminToken := lookup("ADMIN_TOKEN")
	if adminToken == "" && lookup("ADMIN_TOKEN_SECRET_ARN") == "" {
		if adminToken, st.adminKept, err = keptAdminToken(localDir); err != nil {
			return 1, startErrorf("LOCAL_DIR", "admin token: %v", err)
		}
		env["ADMIN_TOKEN"] = adminToken
	}
	cfg, err := config.Load(lookup, config.NeedDatabase|config.NeedAdminToken)
	if err != nil {
		return 1, err
	}
	a, err := app.New(ctx, cfg, app.Options{Logger: log, MaxConns: 8, OpenBucket: s3blobs.OpenBucket, LoadAWS: loadAWS})
	if err != nil {
		return 1, err
	}
	defer a.Close()
	if err := checkDatabase(ctx, a, st.ownDB != ""); err != nil {
		return 1, err
	}
	if cfg.ContentBucket != "" {
		if err := prepareBucket(ctx, cfg, loadAWS, log, st.localS3); err != nil {
			return 1, err
		}
	}

	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = migrations.Up(mctx, a.DatabaseURL)
	cancel()
	if err != nil {
		return 1, fmt.Errorf("migrate: %w", err)
	}
	if st.reused {
		if st.earlier, err = earlierData(ctx, a.Pool, st.localS3); err != nil {
			return 1, fmt.Errorf("earlier data: %w", err)
		}
	}

	ws, err := devWorkspace(ctx, a.Pool, getenv("DEV_WORKSPACE_ID"), localDir, st.ownDB != "")
	if err != nil {
		return 1, startErrorf("DEV_WORKSPACE_ID", "%v", err)
	}
	var wsToken string
	if ws != uuid.Nil {
		if wsToken, _, err = admin.CreateToken(ctx, a.Pool, ws); err != nil {
			return 1, fmt.Errorf("workspace token: %w", err)
		}
	}

	srv := &http.Server{
		Handler:           reqlog.Middleware(a.API.Mux(), log),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // a 25 MiB body on a slow link
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	printBanner(stdout, banner{
		base: "http://" + hostForURL(ln.Addr().String()), adminToken: adminToken,
		adminGenerated: env["ADMIN_TOKEN"] != "", ws: ws, wsToken: wsToken, cfg: cfg, started: st, page: page,
	})
	if page.ln != nil {
		ps := exampleServer(page.root)
		go func() { _ = ps.Serve(page.ln) }()
		defer ps.Close()
	}
	stopPush, err := startPush(a, lookup, ln.Addr(), stdout, log)
	if err != nil {
		return 1, err
	}
	defer stopPush()

	done := make(chan struct{})
	go func() {
		defer close(done)
		sweepLoop(ctx, a, log)
	}()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready <- ln.Addr().String()
	}

	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "\nStopping...")
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

// localS3Wanted reads LOCAL_S3.
func localS3Wanted(getenv func(string) string) (bool, error) {
	v := getenv("LOCAL_S3")
	if v == "" {
		return false, nil
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
