package pendinguploads

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestRoundTripRefusesUnguarded: a statement queued without callerMayAct
// is never sent, and the round trip fails; one with it is sent with the
// caller's check written in, its parameters numbered by the statement.
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

	t.Run("errUnguarded", func(t *testing.T) {
		rt, err := s.roundTrip(ctx, auth.AdminIdentity(), ws)
		if err != nil {
			t.Fatal(err)
		}
		st := rt.statement()
		var ran bool
		rt.queue(st, `UPDATE pending_uploads SET acked_at = now() WHERE workspace_id = `+st.Workspace()).Exec(nil)
		if _, err := rt.send(ctx, "test"); !errors.Is(err, errUnguarded) {
			t.Fatalf("got %v, want errUnguarded", err)
		}
		if err := pool.QueryRow(ctx, `SELECT acked_at IS NOT NULL FROM pending_uploads WHERE workspace_id = $1`, ws).Scan(&ran); err != nil || ran {
			t.Fatalf("the unguarded statement ran: %v, %v", ran, err)
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
			st := rt.statement()
			if got := st.Arg("a.txt"); got != "$1" {
				t.Fatalf("first parameter: got %s, want $1", got)
			}
			n := 0
			rt.queue(st, `SELECT 1 FROM pending_uploads WHERE filename = $1 AND workspace_id = `+st.Workspace()+` AND `+callerMayAct).Query(
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
