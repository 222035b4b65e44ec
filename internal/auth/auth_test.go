package auth_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const admin = "an-admin-token-of-some-length"

func bearer(tok string) *http.Request {
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// identify is Identify then, for a bearer, Verify for ws.
func identify(ctx context.Context, a *auth.Authenticator, r *http.Request, ws uuid.UUID) (*auth.Identity, error) {
	id, err := a.Identify(r)
	if err != nil {
		return nil, err
	}
	return id, a.Verify(ctx, id, &ws)
}

func TestIdentifyAndVerify(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MustOpen(t)
	a, err := auth.NewAuthenticator(auth.NewTokens(pool), admin)
	if err != nil {
		t.Fatal(err)
	}
	ws := uuid.New()
	tok, info, err := auth.CreateToken(ctx, pool, ws)
	if err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := pool.QueryRow(ctx, `SELECT token_hash FROM workspace_auth_tokens WHERE id = $1`, info.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if string(stored) == tok || len(stored) != 32 || !strings.HasPrefix(tok, info.Prefix) {
		t.Fatalf("stored %x for token prefix %s: want only its SHA-256", stored, info.Prefix)
	}

	t.Run("Admin", func(t *testing.T) {
		id, err := identify(ctx, a, bearer(admin), uuid.New())
		if err != nil || id.Kind != auth.Admin || !id.Trusted() {
			t.Fatalf("got %+v, %v", id, err)
		}
	})
	t.Run("Workspace", func(t *testing.T) {
		id, err := identify(ctx, a, bearer(tok), ws)
		if err != nil || id.Kind != auth.Workspace || id.WorkspaceID != ws || id.Trusted() || id.TokenPrefix != info.Prefix {
			t.Fatalf("got %+v, %v", id, err)
		}
	})
	t.Run("ErrNotAllowed", func(t *testing.T) {
		if _, err := identify(ctx, a, bearer(tok), uuid.New()); !errors.Is(err, auth.ErrNotAllowed) {
			t.Fatalf("another workspace: got %v, want ErrNotAllowed", err)
		}
	})
	t.Run("ErrMissing", func(t *testing.T) {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Basic "+tok)
		r.Header.Set("Cookie", "session=abc") // no session check configured: ignored
		if _, err := a.Identify(r); !errors.Is(err, auth.ErrMissing) {
			t.Fatalf("got %v, want ErrMissing", err)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, bad := range []string{admin + "x", tok + "x", "pu_nope", strings.Repeat("a", 600)} {
			if _, err := identify(ctx, a, bearer(bad), ws); !errors.Is(err, auth.ErrInvalid) {
				t.Fatalf("%q: got %v, want ErrInvalid", bad, err)
			}
		}
	})
	t.Run("Revoked", func(t *testing.T) {
		if n, err := auth.RevokeToken(ctx, pool, ws, info.Prefix); err != nil || n != 1 {
			t.Fatalf("revoke: %d, %v", n, err)
		}
		if _, err := identify(ctx, a, bearer(tok), ws); !errors.Is(err, auth.ErrInvalid) {
			t.Fatalf("revoked token: got %v, want ErrInvalid", err)
		}
	})
	t.Run("StampIsBestEffort", func(t *testing.T) {
		// A read-only session cannot stamp last_used_at; the token still works.
		tok2, _, err := auth.CreateToken(ctx, pool, ws)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE workspace_auth_tokens SET last_used_at = NULL`); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `ALTER DATABASE `+currentDB(t, pool)+` SET default_transaction_read_only = on`); err != nil {
			t.Fatal(err)
		}
		pool.Reset() // new connections pick the setting up
		id, err := identify(ctx, a, bearer(tok2), ws)
		if err != nil {
			t.Fatalf("read-only database: got %v, want the token accepted", err)
		}
		a.StampIfDue(ctx, id)
	})
}

// TestVerifyFailsClosed: a database that cannot answer is an error, never
// an accepted token.
func TestVerifyFailsClosed(t *testing.T) {
	pool := pgtest.MustOpen(t)
	a, err := auth.NewAuthenticator(auth.NewTokens(pool), admin)
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	id, err := a.Identify(bearer("pu_some-token"))
	if err != nil {
		t.Fatal(err)
	}
	ws := uuid.New()
	err = a.Verify(context.Background(), id, &ws)
	if err == nil || errors.Is(err, auth.ErrInvalid) || id.Kind != auth.Bearer {
		t.Fatalf("closed pool: got %v (kind %v), want a database error and the token unresolved", err, id.Kind)
	}
}

func currentDB(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var name string
	if err := pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return pgx.Identifier{name}.Sanitize()
}
