package pendinguploads

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/semaphore"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestRoundTripRefusesUnguarded: a statement that does not name
// callerMayAct is never run, and the round trip fails; one built from
// a nil access, or one assembled by hand, is not sent at all; one that names it is sent with the
// caller's arguments.
func TestRoundTripRefusesUnguarded(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MustOpen(t)
	s := New(pool, nil, Settings{})
	ws := uuid.New()
	mustExec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(`INSERT INTO pending_uploads (file_id, workspace_id, content, size_bytes, sha256, filename, mimetype, expires_at)
		VALUES ($1, $2, 'x', 1, decode(repeat('00', 32), 'hex'), 'a.txt', '', now() + interval '1 hour')`, uuid.New(), ws)
	acked := func() bool {
		t.Helper()
		var ran bool
		if err := pool.QueryRow(ctx, `SELECT acked_at IS NOT NULL FROM pending_uploads WHERE workspace_id = $1`, ws).Scan(&ran); err != nil {
			t.Fatal(err)
		}
		return ran
	}

	t.Run("Unguarded", func(t *testing.T) {
		a, err := s.access(ctx, auth.AdminIdentity(), ws)
		if err != nil {
			t.Fatal(err)
		}
		var b pgx.Batch
		b.Queue(`UPDATE pending_uploads SET acked_at = now() WHERE workspace_id = @workspace`).Exec(nil)
		if err := a.send(ctx, "test", &b); err == nil {
			t.Fatal("a statement without callerMayAct was sent and succeeded")
		}
		if acked() {
			t.Fatal("the unguarded statement ran")
		}
	})
	t.Run("errNoAccess", func(t *testing.T) {
		for name, a := range map[string]*access{"Nil": nil, "ByHand": {s: s, ws: ws, trusted: true}} {
			var b pgx.Batch
			b.Queue(`UPDATE pending_uploads SET acked_at = now() WHERE workspace_id = @workspace AND `+a.callerMayActOrEmpty(),
				pgx.StrictNamedArgs{}).Exec(nil)
			if err := a.send(ctx, "test", &b); !errors.Is(err, errNoAccess) {
				t.Fatalf("%s: got %v, want errNoAccess", name, err)
			}
		}
		if acked() {
			t.Fatal("a statement of an access no check made ran")
		}
	})
	for _, c := range []struct {
		name   string
		caller *auth.Identity
		rows   int
		want   error
	}{
		{"Trusted", auth.AdminIdentity(), 1, nil},
		{"ErrInvalid", auth.TokenIdentity("pu_never-minted"), 0, auth.ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := s.access(ctx, c.caller, ws)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			var b pgx.Batch
			b.Queue(`SELECT 1 FROM pending_uploads WHERE filename = @name AND workspace_id = @workspace AND `+a.callerMayAct,
				pgx.StrictNamedArgs{"name": "a.txt"}).Query(
				func(rows pgx.Rows) error {
					for rows.Next() {
						n++
					}
					return rows.Err()
				})
			if err := a.send(ctx, "test", &b); !errors.Is(err, c.want) || (c.want == nil && err != nil) || n != c.rows {
				t.Fatalf("got %d rows, %v; want %d, %v", n, err, c.rows, c.want)
			}
		})
	}
}

// callerMayActOrEmpty is a's condition, "" for a nil access (a statement
// of an access no check made, as a bug would write it).
func (a *access) callerMayActOrEmpty() string {
	if a == nil {
		return ""
	}
	return a.callerMayAct
}

// TestLookupPlansStaySmall: on the platform's schema, the planner's cost
// of the look-up and of a guarded statement stays far below
// jit_above_cost (100000, Postgres's default), where Postgres would
// JIT-compile the statement on every execution (half a second each, seen
// with a walk of the org tree the planner overestimated).
func TestLookupPlansStaySmall(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.MustPlatformURL(t, false))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var jitAbove float64
	if err := pool.QueryRow(ctx, `SELECT current_setting('jit_above_cost')::float8`).Scan(&jitAbove); err != nil {
		t.Fatal(err)
	}
	tokens := &tokens{db: pool, logger: slog.Default, now: time.Now, reading: semaphore.NewWeighted(1)}
	s, err := tokens.readSchema(ctx)
	if err != nil || !s.orgTokens || !s.uuidv5 {
		t.Fatalf("platform schema read as %+v, %v: want org tokens and UUID v5", s, err)
	}
	hash, ws := auth.TokenIdentity("some-token").TokenHash(), uuid.New()
	for name, q := range map[string]string{
		"lookup": s.lookupSQL(),
		"guard":  `SELECT 1 FROM pending_uploads WHERE workspace_id = @workspace AND ` + s.mayActSQL(),
	} {
		var plan []struct {
			Plan struct {
				TotalCost float64 `json:"Total Cost"`
			} `json:"Plan"`
		}
		var raw []byte
		args := pgx.NamedArgs{"caller_hash": hash, "workspace": ws, "caller_trusted": false}
		if err := pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+q, args).Scan(&raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("%s: plan %s: %v", name, raw, err)
		}
		if cost := plan[0].Plan.TotalCost; cost > jitAbove/10 {
			t.Errorf("%s: planner's cost %.0f, want under a tenth of jit_above_cost (%.0f)", name, cost, jitAbove)
		}
	}
}

// TestSchemaReadHonoursDeadline: a request whose bearer needs the token
// tables read, while another request holds that read, waits no longer
// than its own context: it returns the context's error as ErrUnavailable
// (a 503), not whenever the other read ends.
func TestSchemaReadHonoursDeadline(t *testing.T) {
	s := New(pgtest.MustOpen(t), nil, Settings{})
	if err := s.tokens.reading.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	defer s.tokens.reading.Release(1) // another request's read, never ending here
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.access(ctx, auth.TokenIdentity("pu_some-token"), uuid.New())
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want ErrUnavailable wrapping context.DeadlineExceeded", err)
		}
	case <-time.After(time.Minute): // a hang guard, far past the deadline: not a measure
		t.Fatal("still waiting for the token tables' read a minute after the request's deadline")
	}
}

// TestRevokedBetweenRoundTrips: a call of several round trips (Stage with
// a file for the bucket: a check, the objects, then the rows) whose token
// is revoked after its look-up's round trip is refused in the next one,
// ErrInvalid with nothing done, not a batch that quietly stored nothing
// (errClaimLost: a 500).
func TestRevokedBetweenRoundTrips(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MustOpen(t)
	s := New(pool, nil, Settings{})
	ws := uuid.New()
	const tok = "pu_revoked-between-round-trips"
	id := auth.TokenIdentity(tok)
	if _, err := pool.Exec(ctx, `INSERT INTO workspace_auth_tokens (token_hash, workspace_id, prefix) VALUES ($1, $2, $3)`,
		id.TokenHash(), ws, tok[:9]); err != nil {
		t.Fatal(err)
	}
	rctx := auth.NewContext(ctx, id)
	a, err := s.access(rctx, id, ws)
	if err != nil {
		t.Fatal(err)
	}
	count := func(b *pgx.Batch) *int {
		n := new(int)
		b.Queue(`SELECT count(*) FROM pending_uploads WHERE workspace_id = @workspace AND `+a.callerMayAct, pgx.StrictNamedArgs{}).
			QueryRow(func(row pgx.Row) error { return row.Scan(n) })
		return n
	}
	var first pgx.Batch
	count(&first)
	if err := a.send(rctx, "first", &first); err != nil {
		t.Fatalf("the look-up's round trip: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE workspace_auth_tokens SET revoked_at = now() WHERE token_hash = $1`, id.TokenHash()); err != nil {
		t.Fatal(err)
	}
	var next pgx.Batch
	count(&next)
	if err := a.send(rctx, "next", &next); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("the next round trip after the revocation: got %v, want ErrInvalid", err)
	}
}
