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
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/awsprofile"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/localpg"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/sweep"
	"github.com/pendinguploads/pendinguploads/migrations"
)

// SweepInterval matches the production schedule, rate(5 minutes).
const SweepInterval = 5 * time.Minute

// localDB is the database the dev server's own cluster serves.
const localDB = "pendinguploads"

// run is the dev server; ready, when not nil, receives the listening
// address (tests use it). It returns the process's exit status.
func run(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer, ready chan<- string) int {
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(stderr, nil)))
	fail := func(msg string, err error) int {
		log.Error(msg, "err", err.Error())
		return 1
	}
	env := map[string]string{}
	lookup := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return getenv(k)
	}

	if getenv("DATABASE_URL") == "" && getenv("DB_SECRET_ARN") == "" {
		dir := getenv("LOCAL_DIR")
		if dir == "" {
			dir = ".local"
		}
		abs, err := filepath.Abs(filepath.Join(dir, "pg"))
		if err != nil {
			return fail("local postgres", err)
		}
		fmt.Fprintf(stdout, "Starting a local Postgres in %s (DATABASE_URL is unset)...\n", abs)
		cluster, err := localpg.Start(ctx, localpg.Options{Dir: abs})
		if err != nil {
			return fail("local postgres", err)
		}
		defer cluster.Stop()
		if err := ensureDatabase(ctx, cluster.URL("postgres"), localDB); err != nil {
			return fail("local postgres", err)
		}
		env["DATABASE_URL"] = cluster.URL(localDB)
	}
	adminToken := lookup("ADMIN_TOKEN")
	generated := false
	if adminToken == "" && lookup("ADMIN_TOKEN_SECRET_ARN") == "" {
		tok, err := auth.NewToken()
		if err != nil {
			return fail("admin token", err)
		}
		adminToken, generated = "admin_"+strings.TrimPrefix(tok, auth.TokenPrefix), true
		env["ADMIN_TOKEN"] = adminToken
	}
	cfg, err := config.Load(lookup, config.NeedDatabase|config.NeedAdminToken)
	if err != nil {
		return fail("config", err)
	}
	a, err := app.New(ctx, cfg, app.Options{Logger: log, MaxConns: 8, OpenBucket: s3blobs.OpenBucket, LoadAWS: awsprofile.Load})
	if err != nil {
		return fail("init", err)
	}
	defer a.Close()

	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = migrations.Up(mctx, a.DatabaseURL)
	cancel()
	if err != nil {
		return fail("migrate", err)
	}

	ws, err := devWorkspace(ctx, a.Pool, getenv("DEV_WORKSPACE_ID"))
	if err != nil {
		return fail("DEV_WORKSPACE_ID", err)
	}
	var wsToken string
	if ws != uuid.Nil {
		if wsToken, _, err = auth.CreateToken(ctx, a.Pool, ws); err != nil {
			return fail("workspace token", err)
		}
	}

	port := getenv("PORT")
	if port == "" {
		port = "8080"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(getenv("HOST"), port))
	if err != nil {
		return fail("listen", err)
	}
	srv := &http.Server{
		Handler:           reqlog.Middleware(a.API.Mux(), log),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // a 25 MiB body on a slow link
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	base := "http://" + hostForURL(ln.Addr().String())
	printBanner(stdout, base, adminToken, generated, ws, wsToken, cfg)

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
			return fail("serve", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-done
	return 0
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

func ensureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
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

func printBanner(w io.Writer, base, adminToken string, generated bool, ws uuid.UUID, wsToken string, cfg config.Config) {
	origin := "from ADMIN_TOKEN"
	if generated {
		origin = "generated for this run; set ADMIN_TOKEN to keep one"
	}
	storage := "bytes in Postgres"
	if cfg.ContentBucket != "" {
		storage = "large files in s3://" + cfg.ContentBucket
	}
	if ws == uuid.Nil {
		fmt.Fprintf(w, `
pendinguploads dev server on %s (%s), on the platform's database

  admin token      %s   (%s)

This database holds the platform's workspaces, and the dev server does not
add one to them. Restart with DEV_WORKSPACE_ID set to one of them
(SELECT id FROM workspaces) to get a workspace token and curl lines; the
admin token above works for every workspace meanwhile, and the platform's
own workspace tokens work as they are.

The sweep runs now and every %s. Ctrl-C stops everything.
`, base, storage, adminToken, origin, SweepInterval)
		return
	}
	wsPath := base + "/workspaces/" + ws.String()
	fmt.Fprintf(w, `
pendinguploads dev server on %s (%s)

  admin token      %s   (%s)
  workspace        %s
  workspace token  %s

Stage a file (as the platform, with the admin token):
  curl -sS -F files=@README.md -H 'Authorization: Bearer %s' %s/chat/uploads

Then, as the workspace:
  curl -sS -H 'Authorization: Bearer %s' %s/pending-uploads
  curl -sS -OJ -H 'Authorization: Bearer %s' %s/pending-uploads/<file_id>/content
  curl -sS -X POST -H 'Authorization: Bearer %s' %s/pending-uploads/<file_id>/ack

The sweep runs now and every %s. Ctrl-C stops everything.
`, base, storage, adminToken, origin, ws, wsToken, adminToken, wsPath, wsToken, wsPath, wsToken, wsPath, wsToken, wsPath, SweepInterval)
}

// devWorkspace picks the workspace the dev server mints a token for: the
// one DEV_WORKSPACE_ID names, or a fresh one. On the platform's database
// (it has a workspaces table, which tokens and activity rows reference)
// a fresh one cannot be made without writing the platform's own table,
// which the dev server never does: without DEV_WORKSPACE_ID it returns
// uuid.Nil, and with it the workspace must exist there.
func devWorkspace(ctx context.Context, db *pgxpool.Pool, named string) (uuid.UUID, error) {
	var platform bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('workspaces') IS NOT NULL`).Scan(&platform); err != nil {
		return uuid.Nil, err
	}
	if named == "" {
		if platform {
			return uuid.Nil, nil
		}
		return uuid.New(), nil
	}
	ws, err := uuid.Parse(named)
	if err != nil {
		return uuid.Nil, fmt.Errorf("want a workspace UUID, got %q", named)
	}
	if platform {
		var exists bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workspaces WHERE id = $1)`, ws).Scan(&exists); err != nil {
			return uuid.Nil, err
		}
		if !exists {
			return uuid.Nil, fmt.Errorf("no workspace %s in the platform's workspaces table", ws)
		}
	}
	return ws, nil
}
