package migrations_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/migrations"
)

// firstConcurrent is the first migration that builds indexes
// concurrently.
const firstConcurrent = "20261206100000"

// stepsBefore is how many migrations come before version v.
func stepsBefore(t *testing.T, v string) int {
	t.Helper()
	ups, err := fs.Glob(migrations.Files, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range ups {
		if f < v {
			n++
		}
	}
	return n
}

// TestIndexesBuiltWithoutBlockingWrites: on the platform's database, with
// a platform transaction open on pending_uploads (its server staging a
// row), the migration that builds the new indexes waits for it without
// blocking anyone: another platform insert completes meanwhile (a plain
// CREATE INDEX would have queued its SHARE lock, and every insert behind
// it). Once the old transaction ends, the indexes are built, valid, the
// index they replace is gone, and the table's autovacuum settings are
// ours.
func TestIndexesBuiltWithoutBlockingWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := pgtest.MustPlatformEmptyURL(t, false)
	if err := migrations.Steps(ctx, dsn, stepsBefore(t, firstConcurrent)); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename) VALUES (gen_random_uuid(), 'x', 1, 'platform')`
	old := mustConn(t, dsn)
	tx, err := old.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, insert); err != nil {
		t.Fatal(err)
	}
	up := make(chan error, 1)
	go func() { up <- migrations.Up(ctx, dsn) }()

	watch := mustConn(t, dsn)
	for {
		var waiting bool
		if err := watch.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE query ILIKE '%CREATE INDEX%' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-up:
			t.Fatalf("up ended (%v) before it waited for the open transaction", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	// A failure's bound, not a measure: not blocked, it takes milliseconds.
	ictx, icancel := context.WithTimeout(ctx, 20*time.Second)
	defer icancel()
	if _, err := watch.Exec(ictx, insert); err != nil {
		t.Fatalf("a platform insert while the index is built: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-up; err != nil {
		t.Fatalf("up: %v", err)
	}
	assertVersion(t, dsn, migrations.Latest)
	for _, q := range []struct{ what, sql string }{
		{"the new indexes valid", `SELECT count(*) = 2 FROM pg_index WHERE indisvalid AND indexrelid IN
			(to_regclass('idx_pending_uploads_workspace_pending'), to_regclass('idx_pending_uploads_workspace_page'))`},
		{"the list index replaced", `SELECT to_regclass('idx_pending_uploads_workspace_list') IS NULL`},
		{"autovacuum set", `SELECT reloptions @> ARRAY['autovacuum_vacuum_insert_scale_factor=0'] FROM pg_class WHERE oid = 'pending_uploads'::regclass`},
		{"both inserts kept", `SELECT count(*) = 2 FROM pending_uploads WHERE filename = 'platform'`},
	} {
		var ok bool
		if err := watch.QueryRow(ctx, q.sql).Scan(&ok); err != nil || !ok {
			t.Errorf("%s: got %v (%v)", q.what, ok, err)
		}
	}
}

// TestInvalidIndexBuiltAgain: an index a failed CREATE INDEX CONCURRENTLY
// left invalid (the build was cancelled, or met an error) is dropped and
// built again when the migration runs again; IF NOT EXISTS alone would
// keep the invalid one, which no query uses and every write updates.
func TestInvalidIndexBuiltAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.MustURL(t)
	conn := mustConn(t, dsn)
	// As a failed build leaves it: invalid, its migration dirty.
	if _, err := conn.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'idx_pending_uploads_workspace_pending'::regclass`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE `+migrations.HistoryTable+` SET version = `+firstConcurrent+`, dirty = true`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, dsn); err != nil {
		t.Fatalf("up: %v", err)
	}
	assertVersion(t, dsn, migrations.Latest)
	var valid bool
	if err := conn.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'idx_pending_uploads_workspace_pending'::regclass`).Scan(&valid); err != nil || !valid {
		t.Fatalf("the index after up: valid %v (%v), want built again", valid, err)
	}
}

// TestNoTransactionStatements: a NoTransaction file splits at each ';'
// that ends a line, comment lines dropped.
func TestNoTransactionStatements(t *testing.T) {
	body, err := fs.ReadFile(migrations.Files, firstConcurrent+"_pending_uploads_pending_indexes.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(body), migrations.NoTransaction+"\n") {
		t.Fatalf("the index migration does not start with %q", migrations.NoTransaction)
	}
	got := migrations.Statements(string(body))
	if len(got) != 3 || !strings.HasPrefix(got[0], "CREATE INDEX CONCURRENTLY") || !strings.HasPrefix(got[2], "DROP INDEX CONCURRENTLY") {
		t.Fatalf("statements: %q", got)
	}
}
