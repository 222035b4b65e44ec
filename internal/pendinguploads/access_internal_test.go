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

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestRoundTripRefusesUnguarded: a statement that does not name
// callerMayAct is never run, and the round trip fails; one built from
// the zero access is not sent at all; one that names it is sent with the
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
		rt, err := s.roundTrip(ctx, auth.AdminIdentity(), ws)
		if err != nil {
			t.Fatal(err)
		}
		rt.queue(`UPDATE pending_uploads SET acked_at = now() WHERE workspace_id = @workspace`, nil).Exec(nil)
		if _, err := rt.send(ctx, "test"); err == nil {
			t.Fatal("a statement without callerMayAct was sent and succeeded")
		}
		if acked() {
			t.Fatal("the unguarded statement ran")
		}
	})
	t.Run("errNoAccess", func(t *testing.T) {
		if _, err := s.roundTripOf(access{}); !errors.Is(err, errNoAccess) {
			t.Fatalf("got %v, want errNoAccess", err)
		}
		rt := &roundTrip{s: s} // as if assembled by hand
		rt.queue(`UPDATE pending_uploads SET acked_at = now() WHERE workspace_id = @workspace AND `+rt.callerMayAct, nil).Exec(nil)
		if _, err := rt.send(ctx, "test"); !errors.Is(err, errNoAccess) {
			t.Fatalf("got %v, want errNoAccess", err)
		}
		if acked() {
			t.Fatal("a statement of the zero access ran")
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
			rt, err := s.roundTrip(ctx, c.caller, ws)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			rt.queue(`SELECT 1 FROM pending_uploads WHERE filename = @name AND workspace_id = @workspace AND `+rt.callerMayAct,
				pgx.StrictNamedArgs{"name": "a.txt"}).Query(
				func(rows pgx.Rows) error {
					for rows.Next() {
						n++
					}
					return rows.Err()
				})
			caller, err := rt.send(ctx, "test")
			if !errors.Is(err, c.want) || (c.want == nil && err != nil) || n != c.rows {
				t.Fatalf("got %d rows, %v; want %d, %v", n, err, c.rows, c.want)
			}
			if c.want == nil && caller != c.caller {
				t.Fatalf("verdict: got %+v, want the trusted caller itself", caller)
			}
		})
	}
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
	tokens := &tokens{db: pool, logger: slog.Default, now: time.Now}
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
