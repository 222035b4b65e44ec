package pendinguploads_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestRevocationRacesARequest: a token revoked, or restored, while a
// request's round trip runs (between its bearer look-up and the
// statements after it, each its own snapshot under READ COMMITTED) is
// decided once: the request is refused with nothing stored, or succeeds
// with its rows stored; never a 500 (the look-up allowed, the INSERT
// refused: errClaimLost), never rows stored beside a refusal (whose
// cleanup would delete the objects of rows that committed).
//
// The race is made, not hoped for: another connection holds what the
// round trip's second or third statement must wait for (the workspace's
// quota lock; the table pending_uploads), the test waits until Postgres
// shows the round trip waiting there, changes the token, and lets go.
func TestRevocationRacesARequest(t *testing.T) {
	ctx := context.Background()
	url := pgtest.MustURL(t)
	other, err := pgxpool.New(ctx, url) // the test's own connections
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	// The store on one connection: its statements, prepared by a first
	// request, are not prepared again (a Parse would take the table's
	// lock before the look-up runs).
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	settings := apptest.StoreSettings()
	if settings.MaxPendingFiles <= 0 {
		t.Fatal("the test needs the quota on: its lock is where the round trip waits")
	}
	s := pendinguploads.New(pool, nil, settings)

	for _, c := range []struct {
		name        string
		revoked     bool   // the token's state when the request starts
		hold, waits string // what the test holds, and the lock Postgres shows the round trip waiting for
		change      string // what the test does to the token meanwhile
	}{
		{"RevokedAfterTheLookUp", false, `SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7226))`, "advisory",
			`UPDATE workspace_auth_tokens SET revoked_at = now() WHERE token_hash = $1`},
		{"RestoredAfterTheLookUp", true, `LOCK TABLE pending_uploads IN ACCESS EXCLUSIVE MODE`, "relation",
			`UPDATE workspace_auth_tokens SET revoked_at = NULL WHERE token_hash = $1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := uuid.New()
			tok, _, err := admin.CreateToken(ctx, other, ws)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(tok))
			stage := func(name string) ([]pendinguploads.Record, error) {
				id := auth.TokenIdentity(tok)
				return s.Stage(auth.NewContext(ctx, id), id, ws, []pendinguploads.File{{Content: []byte("x"), Filename: name}})
			}
			if _, err := stage("warm-up.txt"); err != nil { // prepares the round trip's statements
				t.Fatal(err)
			}
			if c.revoked {
				mustExec(t, other, `UPDATE workspace_auth_tokens SET revoked_at = now() WHERE token_hash = $1`, sum[:])
			}
			holder, err := other.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback(ctx)
			var args []any
			if c.waits == "advisory" {
				args = append(args, ws.String())
			}
			if _, err := holder.Exec(ctx, c.hold, args...); err != nil {
				t.Fatal(err)
			}
			type result struct {
				recs []pendinguploads.Record
				err  error
			}
			done := make(chan result, 1)
			go func() {
				recs, err := stage("raced.txt")
				done <- result{recs, err}
			}()
			waitForWaiter(t, other, c.waits, done)
			mustExec(t, other, c.change, sum[:])
			if err := holder.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			var stored int
			if err := other.QueryRow(ctx, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1 AND filename = 'raced.txt'`, ws).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			switch {
			case r.err == nil && len(r.recs) == 1 && stored == 1:
				t.Logf("decided as the look-up found it: allowed, stored")
			case errors.Is(r.err, auth.ErrInvalid) && stored == 0:
				t.Logf("decided as the look-up found it: refused, nothing stored")
			default:
				t.Fatalf("got %d records, %v, with %d rows stored: want a success with its row, or a 401 with none", len(r.recs), r.err, stored)
			}
		})
	}
}

// waitForWaiter returns once a session of the database waits for a lock
// of locktype (the round trip, held by the test), failing the test if the
// round trip ends first.
func waitForWaiter[T any](t *testing.T, db *pgxpool.Pool, locktype string, done chan T) {
	t.Helper()
	guard := time.After(time.Minute) // a hang guard, not a measure
	for {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE NOT granted AND locktype = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
			locktype).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case r := <-done:
			done <- r
			t.Fatalf("the round trip ended without waiting for the %s lock", locktype)
		case <-guard:
			t.Fatalf("no session waits for a %s lock after a minute", locktype)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
