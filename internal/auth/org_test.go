package auth_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

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
// rides on (Verify): live, revoked, expired, unanchored, anchored to this
// org by any workspace of it or by the control plane's org UUID, anchored
// to another org.
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
	a, err := auth.NewAuthenticator(auth.NewTokens(o.platformPool), admin)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		token string
		ws    uuid.UUID
		want  error
	}{
		{"org_unanchored", o.grand1, nil},
		{"org_unanchored", o.child2, nil},
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
		id, err := identify(ctx, a, bearer(c.token), c.ws)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s on %s: got %v, want %v", c.token, c.ws, err, c.want)
			continue
		}
		if c.want != auth.ErrInvalid && (id.Kind != auth.Org || id.TokenPrefix != c.token[:6]) {
			t.Errorf("%s: identity %+v, want an org token", c.token, id)
		}
	}

	t.Run("StampsLastUsedAt", func(t *testing.T) {
		id, err := identify(ctx, a, bearer("org_root2"), o.child2)
		if err != nil {
			t.Fatal(err)
		}
		a.StampIfDue(ctx, id)
		var stamped bool
		sum := sha256.Sum256([]byte("org_root2"))
		if err := o.platformPool.QueryRow(ctx, `SELECT last_used_at IS NOT NULL FROM org_api_tokens WHERE token_hash = $1`, sum[:]).Scan(&stamped); err != nil || !stamped {
			t.Fatalf("last_used_at stamped: %v, %v", stamped, err)
		}
	})
	t.Run("WithoutTheTable", func(t *testing.T) {
		// The service alone: no org_api_tokens, so org tokens do not exist.
		pool := pgtest.MustOpen(t)
		a, err := auth.NewAuthenticator(auth.NewTokens(pool), admin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := identify(ctx, a, bearer("org_unanchored"), o.grand1); !errors.Is(err, auth.ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
	})
}
