package pendinguploads_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// openSmallPool returns a store with a quota over a fresh database
// through a pool of two connections (a Lambda's), waiting for a
// workspace's turn as settings say, and the database's URL.
func openSmallPool(t *testing.T, lockWait time.Duration, lockTries int) (*pendinguploads.Store, string) {
	t.Helper()
	url := pgtest.MustURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	settings := apptest.StoreSettings()
	settings.MaxPendingFiles = 1000
	settings.LockWait, settings.LockTries = lockWait, lockTries
	return pendinguploads.New(pool, nil, settings), url
}

// holdTurn takes ws's lock, the one Stage and Commit take under a quota,
// in a transaction of its own connection (outside the store's pool), until
// the returned function ends it.
func holdTurn(t *testing.T, url string, ws uuid.UUID) (conn *pgx.Conn, release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7226))`, ws); err != nil {
		t.Fatal(err)
	}
	return conn, func() {
		if err := tx.Commit(ctx); err != nil {
			t.Error(err)
		}
	}
}

// TestWaitingUploadHoldsNoConnection: while another transaction holds a
// workspace's turn, uploads into it (more than the pool has connections)
// wait without keeping a connection: another workspace's upload and list
// through the same pool of two still complete, and the waiting uploads
// are stored once the turn is free. (Before, each waiting upload held a
// connection inside pg_advisory_xact_lock: the pool was theirs until the
// turn came, and the other workspace's calls ran into the deadline.)
func TestWaitingUploadHoldsNoConnection(t *testing.T) {
	s, url := openSmallPool(t, 20*time.Millisecond, 100000)
	busy, other := uuid.New(), uuid.New()
	conn, release := holdTurn(t, url, busy)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const waiting = 4
	errs := make(chan error, waiting)
	for i := range waiting {
		go func() {
			_, err := stageOne(ctx, s, busy, []byte("waits"), fmt.Sprintf("w%d.txt", i), "text/plain")
			errs <- err
		}()
	}
	// The uploads are waiting: some of their tries have met the lock.
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no upload ever waited for the workspace's turn")
		case <-time.After(5 * time.Millisecond):
		}
	}
	// A failure's bound, not a measure: done in time, these take
	// milliseconds.
	octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
	defer ocancel()
	if _, err := stageOne(octx, s, other, []byte("meanwhile"), "other.txt", "text/plain"); err != nil {
		t.Fatalf("another workspace's upload while one waits: %v", err)
	}
	recs, _, err := s.List(octx, auth.AdminIdentity(), other, 10, nil)
	if err != nil || len(recs) != 1 {
		t.Fatalf("another workspace's list while one waits: %d rows, %v", len(recs), err)
	}
	release()
	for range waiting {
		if err := <-errs; err != nil {
			t.Errorf("a waiting upload, once its turn came: %v", err)
		}
	}
	recs, _, err = s.List(ctx, auth.AdminIdentity(), busy, 10, nil)
	if err != nil || len(recs) != waiting {
		t.Fatalf("the waiting uploads: %d stored (%v), want %d", len(recs), err, waiting)
	}
}

// TestBusyWorkspaceGivesUp: an upload whose workspace's turn does not come
// within its tries is ErrWorkspaceBusy, and stores nothing.
func TestBusyWorkspaceGivesUp(t *testing.T) {
	s, url := openSmallPool(t, 5*time.Millisecond, 3)
	ws := uuid.New()
	conn, release := holdTurn(t, url, ws)
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := stageOne(ctx, s, ws, []byte("refused"), "busy.txt", "text/plain")
	if !errors.Is(err, pendinguploads.ErrWorkspaceBusy) {
		t.Fatalf("stage into a busy workspace: got %v, want ErrWorkspaceBusy", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pending_uploads) + (SELECT count(*) FROM activity_logs)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows stored by a busy upload: %d (%v)", n, err)
	}
}
