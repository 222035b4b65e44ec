package pendinguploads_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// The look-up of bearer tokens (access.go), through Store.Verify: the
// same SQL a store call's round trip carries.

// identify is Identify then, for a bearer, the store's Verify for ws, in
// a request's context: who the request acts as.
func identify(ctx context.Context, a *auth.Authenticator, s *pendinguploads.Store, r *http.Request, ws uuid.UUID) (*auth.Identity, error) {
	id, err := a.Identify(r)
	if err != nil {
		return nil, err
	}
	rctx := auth.NewContext(ctx, id)
	err = s.Verify(rctx, id, &ws)
	return auth.FromContext(rctx), err
}

func bearer(tok string) *http.Request {
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

const adminToken = "an-admin-token-of-some-length"

func TestVerify(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.MustOpen(t)
	s := pendinguploads.New(pool, nil, apptest.StoreSettings())
	a, err := auth.NewAuthenticator(adminToken)
	if err != nil {
		t.Fatal(err)
	}
	ws := uuid.New()
	tok, info, err := admin.CreateToken(ctx, pool, ws)
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
		id, err := identify(ctx, a, s, bearer(adminToken), uuid.New())
		if err != nil || id.Kind() != auth.Admin || !id.Trusted() {
			t.Fatalf("got %+v, %v", id, err)
		}
	})
	t.Run("Workspace", func(t *testing.T) {
		id, err := identify(ctx, a, s, bearer(tok), ws)
		if err != nil || id.Kind() != auth.Workspace || id.WorkspaceID() != ws || id.Trusted() || id.TokenPrefix() != info.Prefix {
			t.Fatalf("got %+v, %v", id, err)
		}
	})
	t.Run("ErrNotAllowed", func(t *testing.T) {
		if _, err := identify(ctx, a, s, bearer(tok), uuid.New()); !errors.Is(err, auth.ErrNotAllowed) {
			t.Fatalf("another workspace: got %v, want ErrNotAllowed", err)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, bad := range []string{adminToken + "x", tok + "x", "pu_nope", strings.Repeat("a", 600)} {
			if _, err := identify(ctx, a, s, bearer(bad), ws); !errors.Is(err, auth.ErrInvalid) {
				t.Fatalf("%q: got %v, want ErrInvalid", bad, err)
			}
		}
	})
	t.Run("Revoked", func(t *testing.T) {
		if n, err := admin.RevokeToken(ctx, pool, ws, info.Prefix); err != nil || n != 1 {
			t.Fatalf("revoke: %d, %v", n, err)
		}
		if _, err := identify(ctx, a, s, bearer(tok), ws); !errors.Is(err, auth.ErrInvalid) {
			t.Fatalf("revoked token: got %v, want ErrInvalid", err)
		}
	})
	t.Run("StampIsBestEffort", func(t *testing.T) {
		// A read-only session cannot stamp last_used_at; the token still works.
		tok2, _, err := admin.CreateToken(ctx, pool, ws)
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
		rctx := auth.NewContext(ctx, auth.TokenIdentity(tok2))
		if err := s.Verify(rctx, auth.TokenIdentity(tok2), &ws); err != nil {
			t.Fatalf("read-only database: got %v, want the token accepted", err)
		}
		stamp := auth.TakeStamp(rctx)
		if stamp == nil {
			t.Fatal("no stamp due for a token never used")
		}
		stamp(ctx) // fails, logged
	})
}

// TestVerifyFailsClosed: a database that cannot answer is an error, never
// an accepted token.
func TestVerifyFailsClosed(t *testing.T) {
	pool := pgtest.MustOpen(t)
	a, err := auth.NewAuthenticator(adminToken)
	if err != nil {
		t.Fatal(err)
	}
	s := pendinguploads.New(pool, nil, apptest.StoreSettings())
	pool.Close()
	id, err := a.Identify(bearer("pu_some-token"))
	if err != nil {
		t.Fatal(err)
	}
	ws := uuid.New()
	ctx := auth.NewContext(context.Background(), id)
	err = s.Verify(ctx, id, &ws)
	if err == nil || errors.Is(err, auth.ErrInvalid) || id.Kind() != auth.Bearer || auth.FromContext(ctx) != id {
		t.Fatalf("closed pool: got %v (kind %v), want a database error and the token unresolved", err, id.Kind())
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

// orgTrees is two orgs on the platform's database: org 1's root is the
// UUID v5 of a control-plane org UUID (as the platform names the root it
// provisions for an org), with a child and a grandchild; org 2 a root and
// a child.
type orgTrees struct {
	cpOrg                 uuid.UUID
	root1, child1, grand1 uuid.UUID
	root2, child2, orphan uuid.UUID
	unknownToThePlatform  uuid.UUID
	platformPool          *pgxpool.Pool
	mint                  func(token string, anchor *uuid.UUID, state string)
}

func newOrgTrees(t *testing.T) *orgTrees {
	t.Helper()
	ctx := context.Background()
	o := &orgTrees{cpOrg: uuid.New(), child1: uuid.New(), grand1: uuid.New(), root2: uuid.New(), child2: uuid.New(),
		orphan: uuid.New(), unknownToThePlatform: uuid.New()}
	o.root1 = uuid.NewSHA1(uuid.NameSpaceURL, []byte("molecule-platform-agent:"+o.cpOrg.String()))
	pool, err := pgxpool.New(ctx, pgtest.MustPlatformURL(t, false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	o.platformPool = pool
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, w := range []struct {
		id     uuid.UUID
		parent *uuid.UUID
	}{{o.root1, nil}, {o.child1, &o.root1}, {o.grand1, &o.child1}, {o.root2, nil}, {o.child2, &o.root2}, {o.orphan, nil}} {
		exec(`INSERT INTO workspaces (id, name, parent_id) VALUES ($1, 'w', $2)`, w.id, w.parent)
	}
	o.mint = func(token string, anchor *uuid.UUID, state string) {
		t.Helper()
		sum := sha256.Sum256([]byte(token))
		q := `INSERT INTO org_api_tokens (token_hash, prefix, name, org_id) VALUES ($1, $2, 'cli', $3)`
		switch state {
		case "revoked":
			q = `INSERT INTO org_api_tokens (token_hash, prefix, name, org_id, revoked_at) VALUES ($1, $2, 'cli', $3, now())`
		case "expired":
			q = `INSERT INTO org_api_tokens (token_hash, prefix, name, org_id, expires_at) VALUES ($1, $2, 'cli', $3, now() - interval '1 second')`
		case "expiring":
			q = `INSERT INTO org_api_tokens (token_hash, prefix, name, org_id, expires_at) VALUES ($1, $2, 'cli', $3, now() + interval '1 hour')`
		}
		// The anchor may be the control plane's org UUID, which names no
		// workspace: the platform's foreign key does not hold for it.
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, q, sum[:], token[:6], anchor); err != nil {
			t.Fatalf("mint %s: %v", token, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// TestOrgTokens: org API tokens on the platform's schema, checked against
// the workspace a call names, through the same look-up a store call
// rides on (Verify): live, revoked, expired, unanchored (refused, unless
// the deployment accepts them), anchored to this org by any workspace of
// it or by the control plane's org UUID, anchored to another org.
func TestOrgTokens(t *testing.T) {
	ctx := context.Background()
	o := newOrgTrees(t)
	o.mint("org_unanchored", nil, "")
	o.mint("org_root1", &o.root1, "")
	o.mint("org_child1", &o.child1, "")
	o.mint("org_cporg1", &o.cpOrg, "expiring")
	o.mint("org_root2", &o.root2, "")
	o.mint("org_revoked", nil, "revoked")
	o.mint("org_expired", &o.root1, "expired")
	o.mint("org_nowhere", &o.unknownToThePlatform, "")
	a, err := auth.NewAuthenticator(adminToken)
	if err != nil {
		t.Fatal(err)
	}
	s := pendinguploads.New(o.platformPool, nil, apptest.StoreSettings())
	cases := []struct {
		token string
		ws    uuid.UUID
		want  error
	}{
		{"org_unanchored", o.grand1, auth.ErrUnanchored},
		{"org_unanchored", o.child2, auth.ErrUnanchored},
		{"org_root1", o.grand1, nil},
		{"org_root1", o.root1, nil},
		{"org_root1", o.child2, auth.ErrNotAllowed},
		{"org_root1", o.unknownToThePlatform, auth.ErrNotAllowed},
		{"org_child1", o.grand1, nil}, // anchored by a workspace below the root
		{"org_child1", o.root1, nil},
		{"org_child1", o.root2, auth.ErrNotAllowed},
		{"org_cporg1", o.grand1, nil}, // anchored by the control plane's org UUID
		{"org_cporg1", o.child2, auth.ErrNotAllowed},
		{"org_cporg1", o.orphan, auth.ErrNotAllowed},
		{"org_root2", o.child2, nil},
		{"org_root2", o.grand1, auth.ErrNotAllowed},
		{"org_nowhere", o.grand1, auth.ErrNotAllowed},
		{"org_revoked", o.grand1, auth.ErrInvalid},
		{"org_expired", o.grand1, auth.ErrInvalid},
	}
	for _, c := range cases {
		id, err := identify(ctx, a, s, bearer(c.token), c.ws)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s on %s: got %v, want %v", c.token, c.ws, err, c.want)
			continue
		}
		if c.want != auth.ErrInvalid && (id.Kind() != auth.Org || id.TokenPrefix() != c.token[:6]) {
			t.Errorf("%s: identity %+v, want an org token", c.token, id)
		}
	}

	t.Run("AcceptUnanchored", func(t *testing.T) {
		settings := apptest.StoreSettings()
		settings.AcceptUnanchoredOrgTokens = true
		s := pendinguploads.New(o.platformPool, nil, settings)
		for _, ws := range []uuid.UUID{o.grand1, o.child2} {
			if id, err := identify(ctx, a, s, bearer("org_unanchored"), ws); err != nil || id.Kind() != auth.Org {
				t.Errorf("on %s: got %+v, %v; want the legacy rule: every workspace", ws, id, err)
			}
		}
	})
	t.Run("StampsLastUsedAt", func(t *testing.T) {
		id := auth.TokenIdentity("org_root2")
		rctx := auth.NewContext(ctx, id)
		if err := s.Verify(rctx, id, &o.child2); err != nil {
			t.Fatal(err)
		}
		stamp := auth.TakeStamp(rctx)
		if stamp == nil {
			t.Fatal("no stamp due for a token never used")
		}
		stamp(ctx)
		var stamped bool
		sum := sha256.Sum256([]byte("org_root2"))
		if err := o.platformPool.QueryRow(ctx, `SELECT last_used_at IS NOT NULL FROM org_api_tokens WHERE token_hash = $1`, sum[:]).Scan(&stamped); err != nil || !stamped {
			t.Fatalf("last_used_at stamped: %v, %v", stamped, err)
		}
	})
	t.Run("WithoutTheTable", func(t *testing.T) {
		// The service alone: no org_api_tokens, so org tokens do not exist.
		pool := pgtest.MustOpen(t)
		s := pendinguploads.New(pool, nil, apptest.StoreSettings())
		if _, err := identify(ctx, a, s, bearer("org_unanchored"), o.grand1); !errors.Is(err, auth.ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
	})
}
