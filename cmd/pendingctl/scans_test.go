package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestScans: pendingctl scans lists the files held by malware scanning
// (and only those: not pending, not blocked, not expired), as a table
// and as JSON; with none held it says so and exits 3.
func TestScans(t *testing.T) {
	url := pgtest.MustURL(t)
	vars := map[string]string{"DATABASE_URL": url}
	scans := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"scans"}, args...), func(k string) string { return vars[k] }, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := scans(); code != exitNothing || !strings.Contains(out, "no file held") {
		t.Fatalf("none held: exit %d, %q", code, out)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ws, held := uuid.New(), uuid.New()
	for _, r := range []struct {
		id           uuid.UUID
		state, exp   string
		result, name string
	}{
		{held, "held", "now() + interval '1 day'", "UNSUPPORTED", "secret.zip"},
		{uuid.New(), "pending", "now() + interval '1 day'", "", "waiting.bin"},
		{uuid.New(), "blocked", "now() + interval '1 day'", "THREATS_FOUND", "bad.com"},
		{uuid.New(), "held", "now() - interval '1 second'", "FAILED", "gone.bin"},
	} {
		if _, err := pool.Exec(context.Background(), `
			INSERT INTO scanned_uploads (file_id, workspace_id, s3_key, size_bytes, sha256, filename, created_at, expires_at, state, result)
			VALUES ($1, $2, 'objects/x', 3, '\x00', $3, now(), `+r.exp+`, $4, nullif($5, ''))`, r.id, ws, r.name, r.state, r.result); err != nil {
			t.Fatal(err)
		}
	}
	code, out := scans()
	if code != 0 || !strings.Contains(out, held.String()) || !strings.Contains(out, "UNSUPPORTED") || strings.Count(out, ws.String()) != 1 {
		t.Fatalf("table: exit %d:\n%s", code, out)
	}
	code, out = scans("--json")
	var rows []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0]["file_id"] != held.String() || rows[0]["name"] != "secret.zip" {
		t.Fatalf("json: exit %d:\n%s", code, out)
	}
	if code, _ := scans("--limit", "0"); code != exitUsage {
		t.Fatalf("--limit 0: exit %d, want %d", code, exitUsage)
	}
}
