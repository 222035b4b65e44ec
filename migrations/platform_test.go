package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/migrations"
)

// TestPlatformSchema: on the platform's database (either CHECK), up adds
// what is missing, runs twice cleanly, keeps its history in
// pendinguploads_schema_migrations, and never touches the platform's
// tracker or its column types; a revert is refused there.
func TestPlatformSchema(t *testing.T) {
	for _, cap100 := range []bool{false, true} {
		t.Run(fmt.Sprintf("Cap100MiB=%v", cap100), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dsn := pgtest.MustPlatformEmptyURL(t, cap100)
			conn := mustConn(t, dsn)
			tracker := func() []string {
				rows, err := conn.Query(ctx, `SELECT filename || '@' || applied_at::text FROM schema_migrations ORDER BY filename`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var out []string
				for rows.Next() {
					var s string
					if err := rows.Scan(&s); err != nil {
						t.Fatal(err)
					}
					out = append(out, s)
				}
				return out
			}
			before := tracker()
			for i := range 2 {
				if err := migrations.Up(ctx, dsn); err != nil {
					t.Fatalf("up #%d: %v", i+1, err)
				}
			}
			if after := tracker(); !slices.Equal(before, after) || len(after) != 8 {
				t.Fatalf("the platform's schema_migrations changed: %v, then %v", before, after)
			}
			assertVersion(t, dsn, migrations.Latest)
			for _, q := range []struct{ what, sql string }{
				{"sha256 and s3_key added", `SELECT count(*) = 2 FROM information_schema.columns WHERE table_name = 'pending_uploads' AND column_name IN ('sha256', 's3_key')`},
				{"content nullable", `SELECT is_nullable = 'YES' FROM information_schema.columns WHERE table_name = 'pending_uploads' AND column_name = 'content'`},
				{"the 100 MiB CHECK under the platform's name", `SELECT pg_get_constraintdef(oid) LIKE '%104857600%' FROM pg_constraint WHERE conname = 'pending_uploads_size_bytes_check'`},
				{"token ids still uuid", `SELECT data_type = 'uuid' FROM information_schema.columns WHERE table_name = 'workspace_auth_tokens' AND column_name = 'id'`},
				{"activity_logs still references workspaces", `SELECT count(*) = 1 FROM pg_constraint WHERE conrelid = 'activity_logs'::regclass AND contype = 'f'`},
				{"activity_logs not marked ours", `SELECT obj_description('activity_logs'::regclass, 'pg_class') IS NULL`},
				{"presigned_uploads added", `SELECT to_regclass('presigned_uploads') IS NOT NULL`},
				{"one download link key, 64 hex digits, by up twice", `SELECT count(*) = 1 AND bool_and(key ~ '^[0-9a-f]{64}$') FROM download_link_keys`},
			} {
				var ok bool
				if err := conn.QueryRow(ctx, q.sql).Scan(&ok); err != nil || !ok {
					t.Errorf("%s: got %v (%v)", q.what, ok, err)
				}
			}
			if err := migrations.Down(ctx, dsn); !errors.Is(err, migrations.ErrSharedDatabase) {
				t.Fatalf("down on the platform's database: got %v, want ErrSharedDatabase", err)
			}
			if err := migrations.Steps(ctx, dsn, -1); !errors.Is(err, migrations.ErrSharedDatabase) {
				t.Fatalf("steps -1 on the platform's database: got %v, want ErrSharedDatabase", err)
			}
		})
	}
}

// TestAdoptsHistoryOfOlderBuilds: a database that an older build migrated
// (golang-migrate's default schema_migrations, at that build's latest
// version) moves its history to pendinguploads_schema_migrations on the
// next up, which then applies only what is new.
func TestAdoptsHistoryOfOlderBuilds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.MustEmptyURL(t)
	const olderLatest = 20260601100700
	func() {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
		if err != nil {
			t.Fatal(err)
		}
		src, err := iofs.New(migrations.Files, ".")
		if err != nil {
			t.Fatal(err)
		}
		m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Migrate(olderLatest); err != nil {
			t.Fatalf("older build's up: %v", err)
		}
	}()
	conn := mustConn(t, dsn)
	if _, err := conn.Exec(ctx, `INSERT INTO workspace_auth_tokens (token_hash, workspace_id, prefix) VALUES (sha256('kept'), gen_random_uuid(), 'kept')`); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := migrations.Up(ctx, dsn); err != nil {
			t.Fatalf("up #%d: %v", i+1, err)
		}
	}
	assertVersion(t, dsn, migrations.Latest)
	assertTables(t, dsn, map[string]bool{"schema_migrations": false, migrations.HistoryTable: true})
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM workspace_auth_tokens WHERE prefix = 'kept'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows of the older build: got %d (%v), want them kept", n, err)
	}
}

var _ = stdlib.GetDefaultDriver // registers the "pgx" database/sql driver

// TestFailedMigrationLeavesSchema: a migration that fails on the
// platform's data (a row with both content and an s3_key, which the
// one-location CHECK refuses) changes nothing of the schema, and the next
// up, once the data is mended, goes on from where it stopped.
func TestFailedMigrationLeavesSchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.MustPlatformEmptyURL(t, false)
	conn := mustConn(t, dsn)
	if _, err := conn.Exec(ctx, `ALTER TABLE pending_uploads ADD COLUMN s3_key text;
		INSERT INTO pending_uploads (workspace_id, content, s3_key, size_bytes, filename)
		VALUES (gen_random_uuid(), 'x', 'k', 1, 'a')`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, dsn); err == nil {
		t.Fatal("up: got no error, want the CHECK refused")
	}
	var notNull bool
	if err := conn.QueryRow(ctx, `SELECT attnotnull FROM pg_attribute WHERE attrelid = 'pending_uploads'::regclass AND attname = 'content'`).Scan(&notNull); err != nil || !notNull {
		t.Fatalf("content NOT NULL after the failed migration: %v (%v); want true (rolled back)", notNull, err)
	}
	if _, err := conn.Exec(ctx, `UPDATE pending_uploads SET s3_key = NULL`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, dsn); err != nil {
		t.Fatalf("up after the data is mended: %v", err)
	}
	assertVersion(t, dsn, migrations.Latest)
}

// TestUnknownDirtyVersionRefused: a history left dirty at a version this
// build does not have (a newer build's failed migration) is not guessed
// at: up refuses, and the history stays as it was.
func TestUnknownDirtyVersionRefused(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.MustURL(t)
	conn := mustConn(t, dsn)
	if _, err := conn.Exec(ctx, `UPDATE `+migrations.HistoryTable+` SET version = 29991231000000, dirty = true`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, dsn); err == nil {
		t.Fatal("up over a newer build's dirty version: got no error")
	}
	var v int64
	var dirty bool
	if err := conn.QueryRow(ctx, `SELECT version, dirty FROM `+migrations.HistoryTable).Scan(&v, &dirty); err != nil || v != 29991231000000 || !dirty {
		t.Fatalf("history after the refusal: %d dirty=%v (%v), want it unchanged", v, dirty, err)
	}
}
