// Package migrations holds the schema, embedded so that every binary (the
// functions, the dev server, pendingctl, the tests) can apply it.
//
// Files follow golang-migrate's naming, <version>_<name>.up.sql and
// .down.sql, the version a timestamp. The first is the seed's
// pending_uploads migration, version 20260505100000.
//
// The history lives in pendinguploads_schema_migrations (HistoryTable):
// the service often shares the platform's database, whose own tracker is
// schema_migrations(filename). Every migration adds only what is missing
// (IF NOT EXISTS, tables created only when absent), so that it runs on the
// platform's schema as on an empty database.
//
// A file whose first line is NoTransaction runs outside a transaction,
// one statement at a time (see runNoTransaction): CREATE INDEX
// CONCURRENTLY, which builds an index on a live table without blocking
// its writes, refuses to run inside one.
package migrations

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed *.sql
var files embed.FS

// Latest is the newest migration version in this build. A database at a
// lower version is behind; a higher one was migrated by a newer build.
const Latest = 20261206600000

// HistoryTable is golang-migrate's (version, dirty) table for this
// service. Builds before it used golang-migrate's default,
// schema_migrations; Up moves that history here (see adoptHistory).
const HistoryTable = "pendinguploads_schema_migrations"

// ErrSharedDatabase is returned by Down and by Steps with n < 0 on a
// database that holds the platform's own tracker: reverting would drop
// tables (pending_uploads, workspace_auth_tokens) the platform owns too.
var ErrSharedDatabase = errors.New("migrations: this database is shared with the platform (its schema_migrations tracker is here); refusing to revert")

// Up applies every pending migration to the database at databaseURL (a
// URL or key=value DSN, anything pgx parses). It is safe to call from
// several processes at once: golang-migrate holds an advisory lock.
//
// A migration that fails changes nothing (each file runs as one
// statement batch, in one transaction) and leaves its version marked
// dirty: the next Up records the version before it and goes on. A
// NoTransaction file that fails keeps the statements that ran before the
// failure; each of its statements may run again (IF NOT EXISTS, IF
// EXISTS), and an index a failed CREATE INDEX CONCURRENTLY left invalid is
// dropped before it is built again.
func Up(ctx context.Context, databaseURL string, opts ...Option) error {
	return run(ctx, databaseURL, opts, func(m *migrate.Migrate) error {
		err := m.Up()
		var dirty migrate.ErrDirty
		if errors.As(err, &dirty) {
			if ferr := forcePrevious(m, dirty.Version); ferr != nil {
				return fmt.Errorf("%w (clearing it: %w)", err, ferr)
			}
			err = m.Up()
		}
		return err
	})
}

// forcePrevious records the version before v as applied (none before the
// first).
func forcePrevious(m *migrate.Migrate, v int) error {
	src, err := iofs.New(files, ".")
	if err != nil {
		return err
	}
	defer src.Close()
	first, err := src.First()
	if err != nil {
		return err
	}
	if uint(v) == first {
		return m.Force(-1) // golang-migrate's "no version"
	}
	prev, err := src.Prev(uint(v))
	if err != nil {
		// A dirty version this build does not have (a newer build's):
		// never guess where the schema stands.
		return fmt.Errorf("dirty version %d is not one of this build's migrations; refusing to go on: %w", v, err)
	}
	return m.Force(int(prev))
}

// sharedDown refuses a revert on the platform's database.
func sharedDown(db *sql.DB) func(context.Context) error {
	return func(ctx context.Context) error {
		var platform bool
		err := db.QueryRowContext(ctx, `
			SELECT EXISTS (SELECT 1 FROM information_schema.columns
			               WHERE table_schema = current_schema() AND table_name = 'schema_migrations'
			                 AND column_name = 'filename')`).Scan(&platform)
		if err != nil {
			return fmt.Errorf("migrations: %w", err)
		}
		if platform {
			return ErrSharedDatabase
		}
		return nil
	}
}

// Down reverts every migration. Tests and `pendingctl migrate down` use it;
// nothing in production calls it.
func Down(ctx context.Context, databaseURL string, opts ...Option) error {
	return runChecked(ctx, databaseURL, opts, sharedDown, func(m *migrate.Migrate) error { return m.Down() })
}

// Steps applies n migrations (n > 0) or reverts -n (n < 0).
func Steps(ctx context.Context, databaseURL string, n int, opts ...Option) error {
	var check func(*sql.DB) func(context.Context) error
	if n < 0 {
		check = sharedDown
	}
	return runChecked(ctx, databaseURL, opts, check, func(m *migrate.Migrate) error { return m.Steps(n) })
}

// Version reports the applied version and whether the last migration
// failed half-way (dirty). A database with no migrations reports 0.
func Version(ctx context.Context, databaseURL string, opts ...Option) (version uint, dirty bool, err error) {
	err = run(ctx, databaseURL, opts, func(m *migrate.Migrate) error {
		var verr error
		version, dirty, verr = m.Version()
		if errors.Is(verr, migrate.ErrNilVersion) {
			return nil
		}
		return verr
	})
	return version, dirty, err
}

// Option changes how the migrations connect.
type Option func(*[]stdlib.OptionOpenDB)

// WithBeforeConnect gives each connection the migrations open to
// beforeConnect first: the password of a database whose URL has none,
// an IAM database authentication token (app.App.BeforeConnect).
func WithBeforeConnect(beforeConnect func(context.Context, *pgx.ConnConfig) error) Option {
	return func(o *[]stdlib.OptionOpenDB) {
		if beforeConnect != nil {
			*o = append(*o, stdlib.OptionBeforeConnect(beforeConnect))
		}
	}
}

func run(ctx context.Context, databaseURL string, opts []Option, op func(*migrate.Migrate) error) error {
	return runChecked(ctx, databaseURL, opts, nil, op)
}

// adoptHistory moves the history of a database migrated before
// HistoryTable existed: golang-migrate's default schema_migrations
// (version bigint, dirty boolean) becomes HistoryTable, row and all, in
// one transaction under an advisory lock, so that concurrent callers
// move it once. A schema_migrations of any other shape (the platform's
// (filename, applied_at)) is never read nor touched.
func adoptHistory(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrations: adopt history: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('pendinguploads adopt history'))`); err != nil {
		return fmt.Errorf("migrations: adopt history: %w", err)
	}
	var oldShape, haveNew bool
	err = tx.QueryRowContext(ctx, `
		SELECT
		  (SELECT array_agg(column_name::text ORDER BY column_name::text) FROM information_schema.columns
		   WHERE table_schema = current_schema() AND table_name = 'schema_migrations') IS NOT DISTINCT FROM ARRAY['dirty', 'version'],
		  to_regclass($1) IS NOT NULL`, HistoryTable).Scan(&oldShape, &haveNew)
	if err != nil {
		return fmt.Errorf("migrations: adopt history: %w", err)
	}
	if !oldShape || haveNew {
		return nil
	}
	for _, stmt := range []string{
		`CREATE TABLE ` + HistoryTable + ` (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`,
		`INSERT INTO ` + HistoryTable + ` (version, dirty) SELECT version, dirty FROM schema_migrations`,
		`DROP TABLE schema_migrations`,
	} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrations: adopt history: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrations: adopt history: %w", err)
	}
	return nil
}

func runChecked(ctx context.Context, databaseURL string, opts []Option, check func(*sql.DB) func(context.Context) error, op func(*migrate.Migrate) error) error {
	// pgxpool's parser, so that pool settings in the URL (pool_max_conns,
	// …) are understood and not sent to the server as parameters.
	pcfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return errors.New("migrations: cannot parse the database URL")
	}
	var openOpts []stdlib.OptionOpenDB
	for _, o := range opts {
		o(&openOpts)
	}
	db := stdlib.OpenDB(*pcfg.ConnConfig, openOpts...)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("migrations: connect: %w", err)
	}
	if check != nil {
		if err := check(db)(ctx); err != nil {
			return err
		}
	}
	if err := adoptHistory(ctx, db); err != nil {
		return err
	}
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{MigrationsTable: HistoryTable})
	if err != nil {
		return fmt.Errorf("migrations: driver: %w", err)
	}
	src, err := iofs.New(files, ".")
	if err != nil {
		return fmt.Errorf("migrations: source: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", &noTxDriver{Driver: driver, db: db})
	if err != nil {
		return fmt.Errorf("migrations: init: %w", err)
	}
	defer m.Close()
	// Stop between migrations when the caller gives up; a migration that
	// has started runs to its end (or its statement fails) on its own.
	stop := context.AfterFunc(ctx, func() {
		select {
		case m.GracefulStop <- true:
		default:
		}
	})
	defer stop()
	if err := op(m); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// NoTransaction, as the first line of a migration, makes it run outside a
// transaction: each statement (ended by a ';' at the end of a line) on its
// own, in order, so that CREATE INDEX CONCURRENTLY and DROP INDEX
// CONCURRENTLY can run. Such a file holds only statements that may run
// again after a failure half-way.
const NoTransaction = "-- pendinguploads: no transaction"

// maxMigrationBytes bounds what is read of one migration file.
const maxMigrationBytes = 1 << 20

// noTxDriver is golang-migrate's pgx driver, but that it runs a
// NoTransaction migration statement by statement on db (golang-migrate's
// driver sends a file as one multi-statement query, which Postgres runs
// as one implicit transaction).
type noTxDriver struct {
	database.Driver
	db *sql.DB
}

func (d *noTxDriver) Run(r io.Reader) error {
	body, err := io.ReadAll(io.LimitReader(r, maxMigrationBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxMigrationBytes {
		return fmt.Errorf("a migration larger than %d bytes", maxMigrationBytes)
	}
	if !bytes.HasPrefix(body, []byte(NoTransaction+"\n")) {
		return d.Driver.Run(bytes.NewReader(body))
	}
	return runNoTransaction(context.Background(), d.db, string(body))
}

// concurrentIndex names the index a CREATE INDEX CONCURRENTLY IF NOT
// EXISTS statement builds.
var concurrentIndex = regexp.MustCompile(`(?is)^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(\w+)`)

// runNoTransaction runs body's statements one by one, each its own
// transaction. Before a CREATE INDEX CONCURRENTLY IF NOT EXISTS, an index
// of that name left invalid by an earlier, failed build is dropped
// (concurrently): IF NOT EXISTS alone would keep it, unused and updated
// on every write, for ever.
func runNoTransaction(ctx context.Context, db *sql.DB, body string) error {
	for _, stmt := range statements(body) {
		if m := concurrentIndex.FindStringSubmatch(stmt); m != nil {
			var invalid bool
			err := db.QueryRowContext(ctx, `
				SELECT EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass($1) AND NOT indisvalid)`, m[1]).Scan(&invalid)
			if err != nil {
				return fmt.Errorf("migration: index %s: %w", m[1], err)
			}
			if invalid {
				if _, err := db.ExecContext(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+m[1]); err != nil {
					return fmt.Errorf("migration: drop the invalid index %s: %w", m[1], err)
				}
			}
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return database.Error{OrigErr: err, Err: "migration failed", Query: []byte(stmt)}
		}
	}
	return nil
}

// statements splits a NoTransaction file into its statements: comment
// lines dropped, each statement ended by a ';' at the end of a line.
func statements(body string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, cur.String())
	}
	return out
}
