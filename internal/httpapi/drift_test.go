package httpapi_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// testClock is a store clock (apptest.Options.Now) that a test moves
// forward: time.Now plus an offset, safe for concurrent use.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// TestTokenTablesDisappear: a platform migration renames org_api_tokens
// while the service runs (it read the token tables at its first look-up).
// No request answers 500: the request that meets the missing relation is
// 503 (retry), and from the next one on workspace and admin tokens work
// again while the old org token fails closed (401). Before, every bearer
// request answered 500 until a restart. When the table comes back, org
// tokens work again within pendinguploads.TokenTablesMaxAge (before, they
// stayed 401 until a restart).
func TestTokenTablesDisappear(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	o := newOrgSetup(t, apptest.Options{Now: clock.now})
	srv := o.srv
	_, wsTok := platformWorkspaceIn(t, srv, o.child1)
	orgTok := o.mintOrgToken(t, &o.root1)
	list := listURL(srv, o.child1.String())
	for _, tok := range []string{wsTok, orgTok, srv.AdminToken} {
		wantStatus(t, get(t, list, tok), http.StatusOK) // the schema is read, org tokens with it
	}

	sqlExec(t, srv, `ALTER TABLE org_api_tokens RENAME TO org_api_tokens_v2`)
	var first []int
	for _, tok := range []string{wsTok, wsTok} {
		res := get(t, list, tok)
		first = append(first, res.status)
		if res.status != http.StatusOK && res.status != http.StatusServiceUnavailable {
			t.Fatalf("workspace token after the rename: got %d %s, want 200 or a 503 to retry", res.status, res.body)
		}
	}
	if first[1] != http.StatusOK {
		t.Fatalf("workspace token after the rename: got %v, want 200 by the second request", first)
	}
	for name, c := range map[string]struct {
		tok    string
		status int
	}{"Workspace": {wsTok, http.StatusOK}, "Admin": {srv.AdminToken, http.StatusOK}, "Org": {orgTok, http.StatusUnauthorized}} {
		t.Run(name, func(t *testing.T) {
			wantStatus(t, get(t, list, c.tok), c.status)
			wantStatus(t, get(t, contentURL(srv, o.child1.String(), o.file.FileID), c.tok), c.status)
		})
	}

	// The table comes back: never a 500, and once the tables read are
	// TokenTablesMaxAge old, the org token works again.
	sqlExec(t, srv, `ALTER TABLE org_api_tokens_v2 RENAME TO org_api_tokens`)
	if res := get(t, list, orgTok); res.status >= 500 {
		t.Errorf("org token after the table came back: got %d %s", res.status, res.body)
	}
	clock.advance(pendinguploads.TokenTablesMaxAge)
	wantStatus(t, get(t, list, orgTok), http.StatusOK)
}

// TestTokenColumnsRenamed: a column the org look-up names (or the
// workspaces table it walks) is missing, either from the process's first
// look-up (a platform database older than that migration) or renamed away
// while it runs. Workspace and admin tokens work (after at most the one
// 503 of the request that met the change); org tokens are refused (401,
// fail closed); and when the column comes back, org tokens work again
// within pendinguploads.TokenTablesMaxAge, no restart. Before, every
// workspace token answered 503 until the column came back.
func TestTokenColumnsRenamed(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ away, back string }{
		"ExpiresAt":  {`ALTER TABLE org_api_tokens RENAME COLUMN expires_at TO expires_at_v2`, `ALTER TABLE org_api_tokens RENAME COLUMN expires_at_v2 TO expires_at`},
		"OrgID":      {`ALTER TABLE org_api_tokens RENAME COLUMN org_id TO org_ref`, `ALTER TABLE org_api_tokens RENAME COLUMN org_ref TO org_id`},
		"ParentID":   {`ALTER TABLE workspaces RENAME COLUMN parent_id TO parent`, `ALTER TABLE workspaces RENAME COLUMN parent TO parent_id`},
		"Workspaces": {`ALTER TABLE workspaces RENAME TO workspaces_v2`, `ALTER TABLE workspaces_v2 RENAME TO workspaces`},
	} {
		t.Run(name, func(t *testing.T) {
			clock := &testClock{}
			o := newOrgSetup(t, apptest.Options{Now: clock.now})
			srv := o.srv
			_, wsTok := platformWorkspaceIn(t, srv, o.child1)
			orgTok := o.mintOrgToken(t, &o.root1)
			list, content := listURL(srv, o.child1.String()), contentURL(srv, o.child1.String(), o.file.FileID)
			missing := func() {
				t.Helper()
				for _, u := range []string{list, content} {
					wantStatus(t, get(t, u, wsTok), http.StatusOK)
					wantStatus(t, get(t, u, srv.AdminToken), http.StatusOK)
					wantStatus(t, get(t, u, orgTok), http.StatusUnauthorized)
				}
			}
			back := func() {
				t.Helper()
				sqlExec(t, srv, c.back)
				clock.advance(pendinguploads.TokenTablesMaxAge)
				wantStatus(t, get(t, list, orgTok), http.StatusOK)
				wantStatus(t, get(t, list, wsTok), http.StatusOK)
			}

			sqlExec(t, srv, c.away) // before the first look-up
			missing()
			back()

			sqlExec(t, srv, c.away) // while the service runs
			if res := get(t, list, wsTok); res.status != http.StatusOK && res.status != http.StatusServiceUnavailable {
				t.Fatalf("workspace token after the rename: got %d %s, want 200 or a 503 to retry", res.status, res.body)
			}
			missing()
			back()
		})
	}
}

// TestRefusedTokenNotStamped: last_used_at moves only for a token
// accepted for the request. A workspace token used on another workspace,
// and an org token anchored to another org, are refused and leave their
// row as it was; the same tokens used where they are allowed are stamped.
func TestRefusedTokenNotStamped(t *testing.T) {
	t.Parallel()
	o := newOrgSetup(t, apptest.Options{})
	srv := o.srv
	_, wsTok := platformWorkspaceIn(t, srv, o.child1)
	orgTok := o.mintOrgToken(t, &o.root2) // anchored to the other org
	lastUsed := func(table, tok string) *time.Time {
		t.Helper()
		sum := sha256.Sum256([]byte(tok))
		var at *time.Time
		if err := srv.Pool.QueryRow(context.Background(), `SELECT last_used_at FROM `+table+` WHERE token_hash = $1`, sum[:]).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	for _, c := range []struct {
		name, table, tok, refusedOn, allowedOn string
	}{
		{"WorkspaceTokenElsewhere", "workspace_auth_tokens", wsTok, o.root2.String(), o.child1.String()},
		{"OrgTokenOfAnotherOrg", "org_api_tokens", orgTok, o.child1.String(), o.kid2.String()},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantStatus(t, get(t, listURL(srv, c.refusedOn), c.tok), http.StatusUnauthorized)
			wantStatus(t, post(t, ackURL(srv, c.refusedOn, o.file.FileID), c.tok, "", nil), http.StatusUnauthorized)
			if at := lastUsed(c.table, c.tok); at != nil {
				t.Fatalf("last_used_at after refusals: got %v, want unset", at)
			}
			wantStatus(t, get(t, listURL(srv, c.allowedOn), c.tok), http.StatusOK)
			// Behind net/http (API.AfterAnswer unset) the stamp runs in
			// serve, before its handler returns: before the answer ends.
			// (A function runs it off the answer's path instead:
			// functions/TestStampOffTheAnswersPath.)
			if lastUsed(c.table, c.tok) == nil {
				t.Fatal("last_used_at after an accepted request: unset, want stamped")
			}
		})
	}
}
