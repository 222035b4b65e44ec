// Package migrations holds the schema, embedded so that every binary (the
// functions, the dev server, pendingctl, the tests) can apply it.
//
// Files follow golang-migrate's naming, NNNN_name.up.sql / .down.sql. The
// first is the seed's pending_uploads migration, version 20260505100000.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed *.sql
var files embed.FS

// Latest is the newest migration version in this build. A database at a
// lower version is behind; a higher one was migrated by a newer build.
const Latest = 20261123001000

// Up applies every pending migration to the database at databaseURL (a
// URL or key=value DSN, anything pgx parses). It is safe to call from
// several processes at once: golang-migrate holds an advisory lock.
func Up(ctx context.Context, databaseURL string) error {
	return run(ctx, databaseURL, func(m *migrate.Migrate) error { return m.Up() })
}

// Down reverts every migration. Tests and `pendingctl migrate down` use it;
// nothing in production calls it.
func Down(ctx context.Context, databaseURL string) error {
	return run(ctx, databaseURL, func(m *migrate.Migrate) error { return m.Down() })
}

// Steps applies n migrations (n > 0) or reverts -n (n < 0).
func Steps(ctx context.Context, databaseURL string, n int) error {
	return run(ctx, databaseURL, func(m *migrate.Migrate) error { return m.Steps(n) })
}

// Version reports the applied version and whether the last migration
// failed half-way (dirty). A database with no migrations reports 0.
func Version(ctx context.Context, databaseURL string) (version uint, dirty bool, err error) {
	err = run(ctx, databaseURL, func(m *migrate.Migrate) error {
		var verr error
		version, dirty, verr = m.Version()
		if errors.Is(verr, migrate.ErrNilVersion) {
			return nil
		}
		return verr
	})
	return version, dirty, err
}

func run(ctx context.Context, databaseURL string, op func(*migrate.Migrate) error) error {
	// pgxpool's parser, so that pool settings in the URL (pool_max_conns,
	// …) are understood and not sent to the server as parameters.
	pcfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return errors.New("migrations: cannot parse the database URL")
	}
	db := stdlib.OpenDB(*pcfg.ConnConfig)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("migrations: connect: %w", err)
	}
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		return fmt.Errorf("migrations: driver: %w", err)
	}
	src, err := iofs.New(files, ".")
	if err != nil {
		return fmt.Errorf("migrations: source: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
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
