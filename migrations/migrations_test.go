package migrations_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/migrations"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestUpDownUp walks the whole chain on a fresh database: up, down to
// nothing, and up again, checking the schema at each end.
func TestUpDownUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.MustEmptyURL(t)

	if err := migrations.Up(ctx, dsn); err != nil {
		t.Fatalf("up: %v", err)
	}
	assertVersion(t, dsn, migrations.Latest)
	assertTables(t, dsn, map[string]bool{"pending_uploads": true, "workspace_auth_tokens": true, "activity_logs": true, "presigned_uploads": true})

	if err := migrations.Down(ctx, dsn); err != nil {
		t.Fatalf("down: %v", err)
	}
	assertVersion(t, dsn, 0)
	assertTables(t, dsn, map[string]bool{"pending_uploads": false, "workspace_auth_tokens": false, "activity_logs": false, "presigned_uploads": false})

	if err := migrations.Up(ctx, dsn); err != nil {
		t.Fatalf("up again: %v", err)
	}
	assertVersion(t, dsn, migrations.Latest)
	assertTables(t, dsn, map[string]bool{"pending_uploads": true, "workspace_auth_tokens": true, "activity_logs": true, "presigned_uploads": true})

	// Up on an up-to-date database is a no-op, not an error.
	if err := migrations.Up(ctx, dsn); err != nil {
		t.Fatalf("up when current: %v", err)
	}
}

// TestActivityLogsKeptWhenPreexisting: a platform that already has an
// activity_logs table keeps it, rows included, through up and down.
func TestActivityLogsKeptWhenPreexisting(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.MustEmptyURL(t)
	conn := mustConn(t, dsn)
	if _, err := conn.Exec(ctx, `CREATE TABLE activity_logs (id bigserial PRIMARY KEY, workspace_id uuid, activity_type text, method text, target_id uuid, summary text, status text, request_body jsonb);
		INSERT INTO activity_logs (activity_type) VALUES ('theirs')`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, dsn); err != nil {
		t.Fatalf("up: %v", err)
	}
	if err := migrations.Down(ctx, dsn); err != nil {
		t.Fatalf("down: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM activity_logs WHERE activity_type = 'theirs'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("pre-existing activity_logs rows: got %d (%v), want 1", n, err)
	}
}

// TestSchemaConstraints checks the CHECKs users rely on: exactly one of
// content and s3_key, the 25 MiB cap, the filename length, and that content
// is stored EXTERNAL (no second compression attempt).
func TestSchemaConstraints(t *testing.T) {
	ctx := context.Background()
	db := pgtest.MustOpen(t)
	cases := []struct {
		name string
		sql  string
	}{
		{"NeitherContentNorKey", `INSERT INTO pending_uploads (workspace_id, size_bytes, filename) VALUES (gen_random_uuid(), 1, 'a')`},
		{"BothContentAndKey", `INSERT INTO pending_uploads (workspace_id, content, s3_key, size_bytes, filename) VALUES (gen_random_uuid(), 'x', 'k', 1, 'a')`},
		{"OverCap", `INSERT INTO pending_uploads (workspace_id, s3_key, size_bytes, filename) VALUES (gen_random_uuid(), 'k', 104857601, 'a')`},
		{"ZeroSize", `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename) VALUES (gen_random_uuid(), 'x', 0, 'a')`},
		{"LongFilename", `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename) VALUES (gen_random_uuid(), 'x', 1, repeat('a', 101))`},
		{"EmptyFilename", `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename) VALUES (gen_random_uuid(), 'x', 1, '')`},
		{"ShortSHA", `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, sha256) VALUES (gen_random_uuid(), 'x', 1, 'a', 'abc')`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := db.Exec(ctx, c.sql); err == nil {
				t.Fatalf("insert accepted, want a CHECK violation")
			}
		})
	}
	if _, err := db.Exec(ctx, `INSERT INTO pending_uploads (workspace_id, s3_key, size_bytes, filename) VALUES (gen_random_uuid(), 'k', 104857600, 'a')`); err != nil {
		t.Fatalf("a 100 MiB row held in S3: %v", err)
	}
	var storage string
	if err := db.QueryRow(ctx, `SELECT attstorage::text FROM pg_attribute WHERE attrelid = 'pending_uploads'::regclass AND attname = 'content'`).Scan(&storage); err != nil {
		t.Fatal(err)
	}
	if storage != "e" {
		t.Fatalf("content storage: got %q, want %q (EXTERNAL)", storage, "e")
	}
}

func assertVersion(t *testing.T, dsn string, want uint) {
	t.Helper()
	v, dirty, err := migrations.Version(context.Background(), dsn)
	if err != nil || dirty || v != want {
		t.Fatalf("version: got %d dirty=%v err=%v, want %d clean", v, dirty, err, want)
	}
}

func assertTables(t *testing.T, dsn string, want map[string]bool) {
	t.Helper()
	conn := mustConn(t, dsn)
	for table, exists := range want {
		var got bool
		if err := conn.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != exists {
			t.Errorf("table %s exists: got %v, want %v", table, got, exists)
		}
	}
}

func mustConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestDownloadLinkKeys: the migration writes one download link key, 64
// hex digits, a different one on each database (random, not a constant of
// the file); up again writes no other.
func TestDownloadLinkKeys(t *testing.T) {
	ctx := context.Background()
	var keys []string
	for range 2 {
		dsn := pgtest.MustEmptyURL(t)
		for i := range 2 {
			if err := migrations.Up(ctx, dsn); err != nil {
				t.Fatalf("up #%d: %v", i+1, err)
			}
		}
		conn := mustConn(t, dsn)
		var key string
		if err := conn.QueryRow(ctx, `SELECT key FROM download_link_keys`).Scan(&key); err != nil {
			t.Fatalf("one key: %v", err)
		}
		if len(key) != 64 || strings.Trim(key, "0123456789abcdef") != "" {
			t.Fatalf("the key: %d characters, want 64 hex digits", len(key))
		}
		keys = append(keys, key)
	}
	if keys[0] == keys[1] {
		t.Fatal("two databases got the same key")
	}
}
