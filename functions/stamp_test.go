package functions_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestStampOffTheAnswersPath: a workspace token's last_used_at stamp,
// due at its first request, does not hold the list function's answer
// (buffered whole, sent only once the handler returns): with the token
// table locked against writes (LOCK … IN SHARE MODE, which the look-up's
// read passes and the stamp's UPDATE waits on, as on a database too slow
// for it), the answer reaches the Runtime API while the stamp is still
// waiting in Postgres, and once the lock goes the stamp lands. (Before:
// serve ran the stamp before its handler returned, so the answer waited
// out the stamp's whole CleanupBudget, 2 s, and the stamp, cut by it,
// never landed.)
func TestStampOffTheAnswersPath(t *testing.T) {
	t.Parallel()
	url := pgtest.MustURL(t)
	pool := openPool(t, url)
	ctx := context.Background()
	tok, _, err := admin.CreateToken(ctx, pool, uuid.MustParse(workspacePlaceholder))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(tok))
	lastUsed := func() *time.Time {
		t.Helper()
		var at *time.Time
		if err := pool.QueryRow(ctx, `SELECT last_used_at FROM workspace_auth_tokens WHERE token_hash = $1`, sum[:]).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	rt := start(t, "list", dbEnv(url)...)
	ev := bytes.ReplaceAll(readEvent(t, "list"), []byte(adminToken), []byte(tok))

	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `LOCK TABLE workspace_auth_tokens IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	var got listBody
	wantJSON(t, invokeHTTP(t, rt, ev), http.StatusOK, &got)
	// The answer is in; the stamp is still waiting for the lock.
	var waiting int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%SET last_used_at%'`).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	if waiting != 1 {
		t.Errorf("stamps waiting in Postgres when the answer arrived: got %d, want 1 (the answer waited for the stamp)", waiting)
	}
	if at := lastUsed(); at != nil {
		t.Fatalf("last_used_at through the lock: got %v, want unset", at)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; lastUsed() == nil; i++ {
		if i == 100 {
			t.Fatal("last_used_at once the lock went: unset after 5 s, want stamped")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
