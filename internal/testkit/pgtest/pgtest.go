// Package pgtest gives each test its own migrated database on a real
// PostgreSQL.
//
// With TEST_DATABASE_URL set, databases are created on that server (its
// user needs CREATEDB). Otherwise the first call starts a throwaway cluster
// (package localpg) in a temporary folder (on Linux, in /dev/shm when it is
// a tmpfs with room: see clusterParent), shared by the whole test binary
// and stopped by Stop (testkit.Main calls it). Each test gets a fresh database cloned from a
// migrated template, which takes milliseconds instead of a full migration.
//
// Use it as:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//	func TestX(t *testing.T) { db := pgtest.MustOpen(t); … }
package pgtest

import (
	"context"
	_ "embed"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/localpg"
	"github.com/pendinguploads/pendinguploads/migrations"
)

const templateDB = "pendinguploads_template"

var (
	once     sync.Once
	setupErr error
	adminURL string           // a database on the server to issue CREATE DATABASE from
	cluster  *localpg.Cluster // nil with TEST_DATABASE_URL
	tmpDir   string
	// templateName is the migrated database each test's is cloned from.
	templateName string
	seq          atomic.Int64
	runID        = fmt.Sprintf("t%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
)

// Stop stops the throwaway cluster and removes its folder. Safe to call
// when none was started.
func Stop() {
	if cluster == nil {
		for _, t := range append([]string{templateName}, platformTmpl[:]...) {
			if t != "" {
				_ = exec(context.Background(), adminURL, "DROP DATABASE IF EXISTS "+pgx.Identifier{t}.Sanitize()+" WITH (FORCE)")
			}
		}
	}
	if cluster != nil {
		cluster.Stop()
	}
	if tmpDir != "" {
		_ = os.RemoveAll(tmpDir)
	}
}

// Cluster returns the throwaway cluster, or nil when the tests run against
// TEST_DATABASE_URL. Fault tests use it to stop and restart the server;
// they skip when it is nil.
func Cluster(tb testing.TB) *localpg.Cluster {
	tb.Helper()
	setup(tb)
	return cluster
}

// MustOpen creates a fresh migrated database for this test and returns a
// pool on it. Both are closed and dropped when the test ends.
func MustOpen(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), MustURL(tb))
	if err != nil {
		tb.Fatalf("pgtest: pool: %v", err)
	}
	tb.Cleanup(pool.Close) // runs before the DROP registered by MustURL
	return pool
}

// MustURL creates a fresh migrated database for this test and returns its
// connection URL, for code under test that builds its own pool or for a
// child process. The database is dropped when the test ends.
func MustURL(tb testing.TB) string {
	tb.Helper()
	setup(tb)
	return cloneOf(tb, templateName)
}

// MustEmptyURL creates a fresh database with no migrations applied, for
// tests of the migrations themselves.
func MustEmptyURL(tb testing.TB) string {
	tb.Helper()
	setup(tb)
	name := fmt.Sprintf("%s_e%d", runID, seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec(ctx, adminURL, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		_ = exec(context.Background(), adminURL, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return withDatabase(adminURL, name)
}

// platformSchema is the platform's database as the service meets it
// (testdata/platform-schema.sql): its tables, its tracker, its foreign
// keys, and pending_uploads with the 25 MiB CHECK.
//
//go:embed testdata/platform-schema.sql
var platformSchema string

// PlatformCap100MiB is the statement that gives a platform database the
// CHECK the platform moved to later (100 MiB, same constraint name).
const PlatformCap100MiB = `ALTER TABLE pending_uploads DROP CONSTRAINT pending_uploads_size_bytes_check;
ALTER TABLE pending_uploads ADD CONSTRAINT pending_uploads_size_bytes_check CHECK (size_bytes > 0 AND size_bytes <= 104857600)`

var (
	platformOnce [2]sync.Once
	platformTmpl [2]string
	platformErr  [2]error
)

// MustPlatformEmptyURL creates a fresh database holding the platform's
// schema (with the 100 MiB CHECK when cap100), before any migration of
// ours: the deployment beside the platform, as found.
func MustPlatformEmptyURL(tb testing.TB, cap100 bool) string {
	tb.Helper()
	u := MustEmptyURL(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec(ctx, u, platformSchema); err != nil {
		tb.Fatalf("pgtest: load the platform schema: %v", err)
	}
	if cap100 {
		if err := exec(ctx, u, PlatformCap100MiB); err != nil {
			tb.Fatalf("pgtest: platform 100 MiB CHECK: %v", err)
		}
	}
	return u
}

// MustPlatformURL creates a fresh database holding the platform's schema
// (with the 100 MiB CHECK when cap100) with our migrations applied over
// it, cloned from a template made once per test binary.
func MustPlatformURL(tb testing.TB, cap100 bool) string {
	tb.Helper()
	setup(tb)
	i := 0
	if cap100 {
		i = 1
	}
	platformOnce[i].Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		tmpl := fmt.Sprintf("%s_platform%d_%s", templateDB, i, runID)
		steps := []string{platformSchema}
		if cap100 {
			steps = append(steps, PlatformCap100MiB)
		}
		if err := exec(ctx, adminURL, "CREATE DATABASE "+pgx.Identifier{tmpl}.Sanitize()); err != nil {
			platformErr[i] = err
			return
		}
		for _, sql := range steps {
			if err := exec(ctx, withDatabase(adminURL, tmpl), sql); err != nil {
				platformErr[i] = fmt.Errorf("platform schema: %w", err)
				return
			}
		}
		if err := migrations.Up(ctx, withDatabase(adminURL, tmpl)); err != nil {
			platformErr[i] = fmt.Errorf("migrate the platform schema: %w", err)
			return
		}
		platformTmpl[i] = tmpl
	})
	if platformErr[i] != nil {
		tb.Fatalf("pgtest: %v", platformErr[i])
	}
	return cloneOf(tb, platformTmpl[i])
}

func cloneOf(tb testing.TB, tmpl string) string {
	tb.Helper()
	name := fmt.Sprintf("%s_%d", runID, seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec(ctx, adminURL, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize()+" STRATEGY FILE_COPY"); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = exec(ctx, adminURL, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return withDatabase(adminURL, name)
}

func setup(tb testing.TB) {
	tb.Helper()
	once.Do(func() { setupErr = start() })
	if setupErr != nil {
		tb.Fatalf("pgtest: %v", setupErr)
	}
}

func start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		adminURL = u
	} else {
		dir, err := os.MkdirTemp(clusterParent(), dirPattern())
		if err != nil {
			return err
		}
		tmpDir = dir
		c, err := localpg.Start(ctx, localpg.Options{Dir: dir, Fast: true})
		if err != nil {
			return err
		}
		cluster = c
		adminURL = c.URL("postgres")
	}
	// One template per test binary: several binaries may share a
	// TEST_DATABASE_URL server at once, so the name carries the run ID.
	tmpl := templateDB + "_" + runID
	if err := exec(ctx, adminURL, "CREATE DATABASE "+pgx.Identifier{tmpl}.Sanitize()); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	if err := migrations.Up(ctx, withDatabase(adminURL, tmpl)); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	templateName = tmpl
	return nil
}

func exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns dsn pointed at database name.
func withDatabase(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String()
	}
	// key=value form: a later dbname wins.
	return strings.TrimSpace(dsn) + " dbname=" + name
}
