package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// askAdmin invokes the admin function with req and decodes its answer;
// a function error fails the test.
func askAdmin(t *testing.T, rt *lambdatest.Runtime, req string) (admin.Answer, []byte) {
	t.Helper()
	payload := invoke(t, rt, []byte(req))
	var ans admin.Answer
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ans); err != nil {
		t.Fatalf("answer %s: %v", payload, err)
	}
	return ans, payload
}

// TestAdmin runs the admin function on events/admin.json and the other
// requests of its protocol: the token it creates is accepted by the list
// function (200), list shows it without the token, revoke makes the list
// function answer 401, and a second revoke is not_found. Requests it
// refuses are answers (bad_request), not function errors; a database that
// does not answer is a function error. The token is never in its log.
func TestAdmin(t *testing.T) {
	t.Parallel()
	url := pgtest.MustURL(t)
	rt := start(t, "admin", "DATABASE_URL="+url)
	list := start(t, "list", dbEnv(url)...)
	pool := openPool(t, url)

	// create, with the sample event
	ans, raw := askAdmin(t, rt, string(readEvent(t, "admin")))
	c := ans.Create
	if c == nil || ans.Error != nil || !strings.HasPrefix(c.Token, "pu_") || c.ID == "" ||
		!strings.HasPrefix(c.Token, c.Prefix) || c.WorkspaceID.String() != workspacePlaceholder || c.CreatedAt.IsZero() {
		t.Fatalf("create: got %s, want a pu_ token of the placeholder workspace with its id, prefix and date", raw)
	}
	tok := c.Token
	var stored int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM workspace_auth_tokens
		WHERE workspace_id = $1 AND token_hash = sha256($2::bytea) AND revoked_at IS NULL`, workspacePlaceholder, []byte(tok)).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("stored hash of the new token: got %d rows (%v), want 1", stored, err)
	}

	// The list function, with the new token instead of the admin's.
	listAs := func(bearer string) int {
		t.Helper()
		ev := bytes.ReplaceAll(readEvent(t, "list"), []byte("Bearer "+adminToken), []byte("Bearer "+bearer))
		return invokeHTTP(t, list, ev).StatusCode
	}
	if got := listAs(tok); got != http.StatusOK {
		t.Fatalf("list with the new token: got %d, want 200", got)
	}

	// list: the token's metadata, never the token
	for _, req := range []string{`{"action":"list","workspace":"` + workspacePlaceholder + `"}`, `{"action":"list","limit":5}`} {
		ans, raw = askAdmin(t, rt, req)
		if ans.List == nil || len(ans.List.Tokens) != 1 || ans.List.Tokens[0].ID != c.ID ||
			ans.List.Tokens[0].Prefix != c.Prefix || ans.List.Tokens[0].RevokedAt != nil {
			t.Errorf("%s: got %s, want the one live token", req, raw)
		}
		if bytes.Contains(raw, []byte(tok)) || bytes.Contains(raw, []byte("hash")) {
			t.Errorf("%s: the answer %s carries the token or a hash", req, raw)
		}
	}

	// revoke by id, then again
	revoke := `{"action":"revoke","workspace":"` + workspacePlaceholder + `","match":"` + c.ID + `"}`
	ans, raw = askAdmin(t, rt, revoke)
	if ans.Revoke == nil || ans.Revoke.Revoked != 1 {
		t.Fatalf("revoke: got %s, want {\"revoke\":{\"revoked\":1}}", raw)
	}
	if got := listAs(tok); got != http.StatusUnauthorized {
		t.Errorf("list with the revoked token: got %d, want 401", got)
	}
	ans, raw = askAdmin(t, rt, revoke)
	if ans.Error == nil || ans.Error.Code != admin.CodeNotFound || ans.Revoke != nil {
		t.Errorf("revoke again: got %s, want a not_found error", raw)
	}

	t.Run("Refused", func(t *testing.T) {
		ws := workspacePlaceholder
		for _, req := range []string{
			`[]`,
			`{}`,
			`{"action":"mint","workspace":"` + ws + `"}`,
			`{"action":"create"}`,
			`{"action":"create","workspace":"not-a-uuid"}`,
			`{"action":"create","workspace":"` + ws + `","label":"laptop"}`,
			`{"action":"revoke","workspace":"` + ws + `"}`,
			`{"action":"list","limit":1001}`,
			`{"action":"list","limit":-1}`,
			// The nil UUID names no workspace: never "every workspace".
			`{"action":"list","workspace":"00000000-0000-0000-0000-000000000000"}`,
			`{"action":"create","workspace":"00000000-0000-0000-0000-000000000000"}`,
			`{"action":"revoke","workspace":"00000000-0000-0000-0000-000000000000","match":"` + c.ID + `"}`,
		} {
			ans, raw := askAdmin(t, rt, req)
			if ans.Error == nil || ans.Error.Code != admin.CodeBadRequest || ans.Error.Message == "" ||
				ans.Create != nil || ans.List != nil || ans.Revoke != nil {
				t.Errorf("%s: got %s, want only a bad_request error with a message", req, raw)
			}
		}
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM workspace_auth_tokens`).Scan(&n); err != nil || n != 1 {
			t.Errorf("tokens after refused requests: got %d (%v), want the 1 created", n, err)
		}
	})

	t.Run("DatabaseDown", func(t *testing.T) {
		down := start(t, "admin", "DATABASE_URL="+deadDatabaseURL(t))
		ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
		defer cancel()
		res, err := down.Invoke(ctx, readEvent(t, "admin"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Err == nil || !strings.Contains(res.Err.Message, "create token") {
			t.Errorf("got answer %s, error %v; want a function error saying create token failed", res.Payload, res.Err)
		}
		if strings.Contains(res.Err.Error(), ":secret@") {
			t.Errorf("the error %v carries the database password", res.Err)
		}
	})

	if strings.Contains(rt.Logs(), tok) || strings.Contains(rt.Logs(), tok[len(c.Prefix):]) {
		t.Errorf("the admin function logged the token:\n%s", rt.Logs())
	}
	if !strings.Contains(rt.Logs(), `"msg":"token created"`) {
		t.Errorf("the admin function did not log the creation:\n%s", rt.Logs())
	}
}

// TestAdminUnknownWorkspace: on the platform's schema, where a token's
// workspace must exist (foreign key), create for a workspace the platform
// does not hold is an answer, workspace_not_found (the HTTP API's 404
// code), with nothing stored and no function error; for one it holds, a
// token. Before, the foreign-key violation was a function error.
func TestAdminUnknownWorkspace(t *testing.T) {
	t.Parallel()
	url := pgtest.MustPlatformURL(t, false)
	rt := start(t, "admin", "DATABASE_URL="+url)
	pool := openPool(t, url)
	unknown, known := uuid.New(), uuid.New()
	if _, err := pool.Exec(context.Background(), `INSERT INTO workspaces (id, name) VALUES ($1, 'w')`, known); err != nil {
		t.Fatal(err)
	}
	ans, raw := askAdmin(t, rt, `{"action":"create","workspace":"`+unknown.String()+`"}`)
	if ans.Error == nil || ans.Error.Code != "workspace_not_found" ||
		!strings.Contains(ans.Error.Message, unknown.String()) || ans.Create != nil {
		t.Errorf("create for an unknown workspace: got %s, want only a workspace_not_found error naming it", raw)
	}
	ans, raw = askAdmin(t, rt, `{"action":"create","workspace":"`+known.String()+`"}`)
	if ans.Create == nil || ans.Create.WorkspaceID != known {
		t.Errorf("create for a workspace of the platform: got %s, want a token", raw)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM workspace_auth_tokens`).Scan(&n); err != nil || n != 1 {
		t.Errorf("tokens stored: got %d (%v), want the 1 of the known workspace", n, err)
	}
}
