package pendinguploads_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// mintToken stores a live token of ws and returns its hash.
func mintToken(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID, token string) []byte {
	t.Helper()
	sum := sha256.Sum256([]byte(token))
	mustExec(t, pool, `INSERT INTO workspace_auth_tokens (token_hash, workspace_id, prefix) VALUES ($1, $2, $3)`,
		sum[:], ws, token[:6])
	return sum[:]
}

// TestTokenCheckedInTheSameRoundTrip: with a workspace token, each call
// checks the token in the round trip that does its work: one round trip
// (a statement alone, or a batch) for list, fetch, ack, stage and
// presign's record, and nothing read or written for a token that is
// unknown, revoked, or another workspace's.
func TestTokenCheckedInTheSameRoundTrip(t *testing.T) {
	s, pool, tr := openTraced(t)
	ctx := context.Background()
	ws, other := uuid.New(), uuid.New()
	mintToken(t, pool, ws, "pu_good-token-of-ws")
	mintToken(t, pool, other, "pu_token-of-other")
	revoked := mintToken(t, pool, ws, "pu_revoked-token")
	mustExec(t, pool, `UPDATE workspace_auth_tokens SET revoked_at = now() WHERE token_hash = $1`, revoked)
	// Fresh stamps: steady state, no stamp due.
	mustExec(t, pool, `UPDATE workspace_auth_tokens SET last_used_at = now()`)

	file := mustStage(t, s, ws, "a.txt")
	mine := func() *auth.Identity { return auth.TokenIdentity("pu_good-token-of-ws") }

	calls := map[string]func(ctx context.Context, c *auth.Identity) error{
		"List": func(ctx context.Context, c *auth.Identity) error {
			_, _, err := s.List(ctx, c, ws, 10, nil)
			return err
		},
		"Fetch": func(ctx context.Context, c *auth.Identity) error {
			_, err := s.Fetch(ctx, c, ws, file.FileID, pendinguploads.Want{})
			return err
		},
		"Stage": func(ctx context.Context, c *auth.Identity) error {
			_, err := s.Stage(ctx, c, ws, []pendinguploads.File{{Content: []byte("x"), Filename: "x.txt"}})
			return err
		},
		"Ack": func(ctx context.Context, c *auth.Identity) error {
			_, err := s.Ack(ctx, c, ws, file.FileID)
			return err
		},
	}
	for _, name := range []string{"List", "Fetch", "Stage", "Ack"} {
		call := calls[name]
		t.Run(name, func(t *testing.T) {
			for _, bad := range []struct {
				name  string
				token string
				want  error
			}{
				{"Unknown", "pu_never-minted", auth.ErrInvalid},
				{"Revoked", "pu_revoked-token", auth.ErrInvalid},
				{"OtherWorkspace", "pu_token-of-other", auth.ErrNotAllowed},
			} {
				rows, acked, fetched := countRows(t, pool, "pending_uploads"), ackedCount(t, pool, file.FileID), fetchedAt(t, pool, file.FileID)
				if err := call(ctx, auth.TokenIdentity(bad.token)); !errors.Is(err, bad.want) {
					t.Fatalf("%s: got %v, want %v", bad.name, err, bad.want)
				}
				if countRows(t, pool, "pending_uploads") != rows || ackedCount(t, pool, file.FileID) != acked ||
					!fetchedAt(t, pool, file.FileID).Equal(fetched) {
					t.Fatalf("%s: the refused call changed a row", bad.name)
				}
			}
			call(context.Background(), mine()) // warm: statements prepared on the connection
			tr.trips.Store(0)
			c := mine()
			rctx := auth.NewContext(context.Background(), c)
			if err := call(rctx, c); err != nil {
				t.Fatal(err)
			}
			if n := tr.trips.Load(); n != 1 {
				t.Fatalf("round trips: got %d, want 1", n)
			}
			if c.Kind() != auth.Bearer || c.TokenPrefix() != "" {
				t.Fatalf("presented identity changed: got %+v", c)
			}
			if found := auth.FromContext(rctx); found.Kind() != auth.Workspace || found.WorkspaceID() != ws || found.TokenPrefix() != "pu_goo" {
				t.Fatalf("identity found: got %+v", found)
			}
		})
	}
}

// fetchedAt is the row's fetched_at, zero while unset.
func fetchedAt(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) time.Time {
	t.Helper()
	var at *time.Time
	if err := pool.QueryRow(context.Background(), `SELECT fetched_at FROM pending_uploads WHERE file_id = $1`, id).Scan(&at); err != nil {
		t.Fatal(err)
	}
	if at == nil {
		return time.Time{}
	}
	return *at
}
