// Package apptest runs the whole service in a test: the real handlers, on
// a real (per-test) Postgres database, optionally with a bucket on moto,
// behind an httptest server. Build it with NewServer; mint tokens with
// WorkspaceToken.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/delayproxy"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgbouncertest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgpause"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtrace"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// AdminToken is the admin token of every test server.
const AdminToken = "test-admin-token-0123456789abcdef"

// LinkKey is the download links' key of every test server.
const LinkKey = "test-download-link-key-0123456789abcdef"

// EnvQueryMode names the variable that, when set, is every test server's
// DATABASE_QUERY_MODE (Options.Env still wins): TEST_DATABASE_QUERY_MODE=exec
// runs a package's tests with the service in exec mode.
const EnvQueryMode = "TEST_DATABASE_QUERY_MODE"

// Options shape a test server. The zero value is the default service
// with bytes in Postgres.
type Options struct {
	// S3 puts a fresh moto bucket behind the store (CONTENT_BUCKET).
	S3 bool
	// Env overrides settings, as the environment would (MAX_REQUEST_BYTES,
	// INLINE_MAX_BYTES, UPLOAD_TTL, …).
	Env map[string]string
	// Log receives the service's JSON log lines (default: discarded).
	Log io.Writer
	// MetricsOut receives EMF lines (default: none).
	MetricsOut io.Writer
	// DBDelay puts Postgres behind a loopback proxy that delays each
	// direction by this much (delayproxy): the round trip of a network,
	// for the service's pool and the test's own (Pool) alike.
	DBDelay time.Duration
	// DBPause puts the service's Postgres (not the test's own pool)
	// behind a proxy that refuses new connections while paused
	// (Server.DBPause.PauseFor): a database restarting or resuming.
	DBPause bool
	// CountRoundTrips counts the round trips of the service's pool
	// (Server.RoundTrips).
	CountRoundTrips bool
	// PgBouncer, when set, puts a PgBouncer (pgbouncertest: transaction
	// pooling, two server connections unless it says otherwise) between
	// the service's pool and Postgres; the test's own pool (Server.Pool)
	// goes straight to Postgres. Set DATABASE_QUERY_MODE in Env to choose
	// the service's mode.
	PgBouncer *pgbouncertest.Options
	// Platform runs the service on the platform's database (its schema,
	// with our migrations over it: pgtest.MustPlatformURL), with the
	// 100 MiB CHECK when Cap100MiB.
	Platform, Cap100MiB bool
	// Now, when set, is the store's clock (pendinguploads.Store.Now), set
	// before the service serves: a test moves it past a bound
	// (pendinguploads.TokenTablesMaxAge) instead of sleeping.
	Now func() time.Time
}

// Server is a running service.
type Server struct {
	URL         string // base URL, no trailing slash
	AdminToken  string
	DatabaseURL string        // the service's database, straight (not through Bouncer)
	Pool        *pgxpool.Pool // a separate pool for the test's own queries
	App         *app.App
	Store       *pendinguploads.Store
	S3          s3test.Endpoint // zero without Options.S3
	Bucket      string
	// Objects reads the bucket around the service (for the test's own
	// checks); nil without Options.S3.
	Objects *s3test.Objects
	// RoundTrips counts the service pool's round trips; nil without
	// Options.CountRoundTrips.
	RoundTrips *pgtrace.RoundTrips
	// DBPause is the proxy the service's pool goes through; nil without
	// Options.DBPause.
	DBPause *pgpause.Proxy
	// Bouncer is the PgBouncer the service's pool goes through; nil
	// without Options.PgBouncer.
	Bouncer *pgbouncertest.Bouncer
}

// NewServer starts the service for tb; everything stops at cleanup (see
// testkit.Main).
func NewServer(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s := &Server{AdminToken: AdminToken}
	if opts.Platform {
		s.DatabaseURL = pgtest.MustPlatformURL(tb, opts.Cap100MiB)
	} else {
		s.DatabaseURL = pgtest.MustURL(tb)
	}
	if opts.DBDelay > 0 {
		u, err := url.Parse(s.DatabaseURL)
		if err != nil {
			tb.Fatalf("apptest: %v", err)
		}
		u.Host = delayproxy.Start(tb, u.Host, opts.DBDelay).Addr
		s.DatabaseURL = u.String()
	}
	serviceURL := s.DatabaseURL
	if opts.DBPause {
		u, err := url.Parse(s.DatabaseURL)
		if err != nil {
			tb.Fatalf("apptest: %v", err)
		}
		s.DBPause = pgpause.Start(tb, u.Host)
		u.Host = s.DBPause.Addr
		serviceURL = u.String()
	}
	if opts.PgBouncer != nil {
		s.Bouncer = pgbouncertest.MustStart(tb, s.DatabaseURL, *opts.PgBouncer)
		serviceURL = s.Bouncer.URL
	}
	env := map[string]string{"DATABASE_URL": serviceURL, "ADMIN_TOKEN": AdminToken, "DOWNLOAD_LINK_KEY": LinkKey,
		// The tests stage as the admin for fresh workspaces that have no
		// token; the refusal of those (the default) is held where it is
		// tested, with Options.Env's ACCEPT_UNKNOWN_WORKSPACES=false.
		"ACCEPT_UNKNOWN_WORKSPACES": "true"}
	// awsEnv is the AWS part of the service's environment with S3: moto's
	// credentials and region, read by awsenv.Load as a function reads its
	// own, and never set in the process (t.Setenv would forbid
	// t.Parallel). Without S3, the process's environment (a test's own
	// t.Setenv) is read, as before.
	awsEnv := map[string]string{}
	if opts.S3 {
		s.S3 = s3test.MustStart(tb)
		var client *s3.Client
		client, s.Bucket = s3test.NewBucket(tb, s.S3)
		s.Objects = &s3test.Objects{Client: client, Bucket: s.Bucket}
		for _, kv := range s.S3.Env() {
			k, v, _ := strings.Cut(kv, "=")
			awsEnv[k] = v
		}
		env["CONTENT_BUCKET"] = s.Bucket
		env["S3_ENDPOINT"] = s.S3.URL
		env["S3_FORCE_PATH_STYLE"] = "true"
	}
	if m := os.Getenv(EnvQueryMode); m != "" {
		env["DATABASE_QUERY_MODE"] = m
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, config.NeedDatabase|config.NeedAdminToken|config.NeedLinkKey)
	if err != nil {
		tb.Fatalf("apptest: %v", err)
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	a, err := app.New(context.Background(), cfg, app.Options{
		Logger:     slog.New(slog.NewJSONHandler(logw, nil)),
		MetricsOut: opts.MetricsOut,
		MaxConns:   8,
		OpenBucket: s3blobs.OpenBucket,
		Tracer:     s.tracer(opts),
		LoadAWS: func(_ context.Context, log *slog.Logger) (aws.Config, error) {
			return awsenv.Load(func(k string) string {
				if v, ok := awsEnv[k]; ok {
					return v
				}
				return os.Getenv(k)
			}, log)
		},
	})
	if err != nil {
		tb.Fatalf("apptest: %v", err)
	}
	tb.Cleanup(a.Close)
	s.App, s.Store = a, a.Store
	if opts.Now != nil {
		s.Store.Now = opts.Now
	}
	hs := httptest.NewServer(a.API.Mux())
	tb.Cleanup(hs.Close)
	s.URL = hs.URL
	pool, err := pgxpool.New(context.Background(), s.DatabaseURL)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	s.Pool = pool
	return s
}

// WorkspaceToken mints a workspace token for ws.
func (s *Server) WorkspaceToken(tb testing.TB, ws uuid.UUID) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, _, err := admin.CreateToken(ctx, s.Pool, ws)
	if err != nil {
		tb.Fatalf("apptest: token: %v", err)
	}
	return tok
}

// tracer is the service pool's tracer: the round-trip counter, when asked.
func (s *Server) tracer(opts Options) pgx.QueryTracer {
	if !opts.CountRoundTrips {
		return nil
	}
	s.RoundTrips = &pgtrace.RoundTrips{}
	return s.RoundTrips
}

// StoreSettings are a store's settings under the configuration's
// defaults, for a test that builds its own store; as NewServer's, it
// stages for workspaces no token was made for (ACCEPT_UNKNOWN_WORKSPACES).
func StoreSettings() pendinguploads.Settings {
	s := app.StoreSettings(config.Defaults())
	s.RefuseUnknownWorkspaces = false
	return s
}
