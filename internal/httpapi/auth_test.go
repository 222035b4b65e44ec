package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// route is one route of API.md, with a request that would succeed on it.
type route struct {
	name   string
	method string
	url    func(srv *apptest.Server, ws, id string) string
	body   func(t *testing.T) (ctype string, body []byte)
	fileID bool // the path has a {fileId}
}

func routes() []route {
	none := func(*testing.T) (string, []byte) { return "", nil }
	return []route{
		{"Upload", "POST", func(s *apptest.Server, ws, _ string) string { return uploadsURL(s, ws) },
			func(t *testing.T) (string, []byte) { b, ct := form(t, file("a.txt", "text/plain", "a")); return ct, b }, false},
		{"Presign", "POST", func(s *apptest.Server, ws, _ string) string { return presignURL(s, ws) },
			func(*testing.T) (string, []byte) {
				return "application/json", []byte(`{"files":[{"name":"a.bin","size":1}]}`)
			}, false},
		{"List", "GET", func(s *apptest.Server, ws, _ string) string { return listURL(s, ws) }, none, false},
		{"Content", "GET", func(s *apptest.Server, ws, id string) string { return contentURL(s, ws, id) }, none, true},
		{"Ack", "POST", func(s *apptest.Server, ws, id string) string { return ackURL(s, ws, id) }, none, true},
	}
}

// do sends rt's request with the given Authorization header value (none
// when "").
func (rt route) do(t *testing.T, srv *apptest.Server, ws, id, authorization string) result {
	t.Helper()
	ctype, body := rt.body(t)
	req := newRequest(t, rt.method, rt.url(srv, ws, id), "", ctype, bytes.NewReader(body))
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	return send(t, req)
}

func TestAuth(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	srv := apptest.NewServer(t, apptest.Options{Log: &logs})
	ws, other := uuid.New(), uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	otherTok := srv.WorkspaceToken(t, other)
	revoked := srv.WorkspaceToken(t, ws)
	wantStatus(t, get(t, listURL(srv, ws.String()), revoked), http.StatusOK)
	sqlExec(t, srv, `UPDATE workspace_auth_tokens SET revoked_at = now() WHERE token_hash = sha256($1::bytea)`, []byte(revoked))
	id := stage(t, srv, ws, "a.txt", "text/plain", "a").FileID

	refused := []struct {
		name          string
		authorization string
		want          string
	}{
		{"MissingNoHeader", "", msgMissing},
		{"MissingBasic", "Basic dXNlcjpwYXNz", msgNoScheme},
		{"MissingOtherScheme", "Token " + tok, msgNoScheme},
		{"MissingBareToken", tok, msgNoScheme},
		{"MissingEmptyBearer", "Bearer ", msgMissing},
		{"InvalidUnknownToken", "Bearer pu_unknownunknownunknownunknownunknown", msgInvalid},
		{"InvalidNotATokenAtAll", "Bearer nope", msgInvalid},
		{"InvalidRevokedToken", "Bearer " + revoked, msgInvalid},
		{"InvalidOtherWorkspacesToken", "Bearer " + otherTok, msgInvalid},
		{"InvalidAdminTokenPrefix", "Bearer " + srv.AdminToken[:len(srv.AdminToken)-1], msgInvalid},
	}
	for _, rt := range routes() {
		for _, tt := range refused {
			t.Run(rt.name+"/"+tt.name, func(t *testing.T) {
				wantError(t, rt.do(t, srv, ws.String(), id, tt.authorization), http.StatusUnauthorized, tt.want, nil)
			})
		}
	}
	// Nothing was staged or acked by the refused requests.
	if u, a := rowCounts(t, srv, ws); u != 1 || a != 1 {
		t.Errorf("rows after refused requests: got (%d, %d), want (1, 1)", u, a)
	}
	if _, acked := timestamps(t, srv, id); acked != nil {
		t.Errorf("acked_at after refused acks: got %v, want nil", acked)
	}

	t.Run("AuthBeforePath", func(t *testing.T) {
		for _, rt := range routes() {
			bads := []struct{ ws, id string }{{"not-a-uuid", id}}
			if rt.fileID {
				bads = append(bads, struct{ ws, id string }{ws.String(), "not-a-uuid"})
			}
			for _, bad := range bads {
				wantError(t, rt.do(t, srv, bad.ws, bad.id, ""), http.StatusUnauthorized, msgMissing, nil)
				wantError(t, rt.do(t, srv, bad.ws, bad.id, "Bearer pu_nope"), http.StatusUnauthorized, msgInvalid, nil)
			}
		}
	})

	t.Run("InvalidWorkspaceID", func(t *testing.T) {
		for _, rt := range routes() {
			for _, bad := range []string{"not-a-uuid", "123", ws.String() + "0", strings.ReplaceAll(ws.String(), "-", "_")} {
				for _, token := range []string{tok, srv.AdminToken} {
					wantError(t, rt.do(t, srv, bad, id, "Bearer "+token), http.StatusBadRequest, msgBadWS, nil)
				}
			}
		}
	})

	t.Run("InvalidFileID", func(t *testing.T) {
		for _, rt := range routes() {
			if !rt.fileID {
				continue
			}
			for _, bad := range []string{"not-a-uuid", "1", id + "0"} {
				for _, token := range []string{tok, srv.AdminToken} {
					wantError(t, rt.do(t, srv, ws.String(), bad, "Bearer "+token), http.StatusBadRequest, msgBadFile, nil)
				}
			}
		}
	})

	t.Run("AdminActsOnAnyWorkspace", func(t *testing.T) {
		any := uuid.New()
		f := stage(t, srv, any, "x.txt", "", "x")
		wantStatus(t, get(t, listURL(srv, any.String()), srv.AdminToken), http.StatusOK)
		wantStatus(t, get(t, contentURL(srv, any.String(), f.FileID), srv.AdminToken), http.StatusOK)
		wantStatus(t, post(t, ackURL(srv, any.String(), f.FileID), srv.AdminToken, "", nil), http.StatusOK)
	})

	t.Run("WorkspaceTokenOnEveryRoute", func(t *testing.T) {
		own := uuid.New()
		ownTok := srv.WorkspaceToken(t, own)
		f := uploadParts(t, srv, own.String(), ownTok, file("mine.txt", "text/plain", "mine"))[0]
		if f.URI != "platform-pending:"+own.String()+"/"+f.FileID {
			t.Errorf("uri: got %q, want %q", f.URI, "platform-pending:"+own.String()+"/"+f.FileID)
		}
		wantStatus(t, get(t, listURL(srv, own.String()), ownTok), http.StatusOK)
		wantStatus(t, get(t, contentURL(srv, own.String(), f.FileID), ownTok), http.StatusOK)
		wantStatus(t, post(t, ackURL(srv, own.String(), f.FileID), ownTok, "", nil), http.StatusOK)
		// Without a bucket presign is 404, but after authentication: the
		// token is accepted (the 404 is JSON, not a 401).
		res := post(t, presignURL(srv, own.String()), ownTok, "application/json", []byte(`{"files":[{"name":"a","size":1}]}`))
		wantStatus(t, res, http.StatusNotFound)
		if got := res.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("presign Content-Type: got %q, want application/json", got)
		}
	})

	t.Run("UpperCaseWorkspaceID", func(t *testing.T) {
		own := uuid.New()
		ownTok := srv.WorkspaceToken(t, own)
		upper := strings.ToUpper(own.String())
		f := uploadParts(t, srv, upper, ownTok, file("up.txt", "text/plain", "up"))[0]
		if want := "platform-pending:" + own.String() + "/" + f.FileID; f.URI != want {
			t.Errorf("uri: got %q, want %q", f.URI, want)
		}
		res := get(t, listURL(srv, own.String()), ownTok)
		wantStatus(t, res, http.StatusOK)
		if !strings.Contains(string(res.body), f.FileID) {
			t.Errorf("list of the lower-case path: got %s, want it to hold %s", res.body, f.FileID)
		}
		res = get(t, listURL(srv, upper), ownTok)
		wantStatus(t, res, http.StatusOK)
		if !strings.Contains(string(res.body), f.FileID) {
			t.Errorf("list of the upper-case path: got %s, want it to hold %s", res.body, f.FileID)
		}
		res = get(t, contentURL(srv, upper, strings.ToUpper(f.FileID)), ownTok)
		wantStatus(t, res, http.StatusOK)
		if string(res.body) != "up" {
			t.Errorf("content: got %q, want %q", res.body, "up")
		}
		wantStatus(t, post(t, ackURL(srv, upper, f.FileID), ownTok, "", nil), http.StatusOK)
		// Another workspace's token stays refused on the upper-case path.
		wantError(t, get(t, listURL(srv, upper), otherTok), http.StatusUnauthorized, msgInvalid, nil)
	})

	t.Run("LastUsedAtStamped", func(t *testing.T) {
		own := uuid.New()
		ownTok := srv.WorkspaceToken(t, own)
		var before *time.Time
		q := `SELECT last_used_at FROM workspace_auth_tokens WHERE workspace_id = $1`
		if err := srv.Pool.QueryRow(context.Background(), q, own).Scan(&before); err != nil {
			t.Fatal(err)
		}
		if before != nil {
			t.Fatalf("last_used_at before use: got %v, want nil", before)
		}
		wantStatus(t, get(t, listURL(srv, own.String()), ownTok), http.StatusOK)
		var after *time.Time
		if err := srv.Pool.QueryRow(context.Background(), q, own).Scan(&after); err != nil {
			t.Fatal(err)
		}
		if after == nil || time.Since(*after) > time.Minute {
			t.Errorf("last_used_at after use: got %v, want about now", after)
		}
	})

	t.Run("TokensNeverLogged", func(t *testing.T) {
		out := logs.String()
		if !strings.Contains(out, `"refused"`) {
			t.Fatalf("log: got no refusal lines, want some (log %.500s)", out)
		}
		for name, secret := range map[string]string{"workspace": tok, "other": otherTok, "revoked": revoked, "admin": srv.AdminToken} {
			if strings.Contains(out, secret) {
				t.Errorf("log holds the %s token", name)
			}
		}
	})
}

// TestLockedTokenRowDoesNotDelay: the last_used_at stamp is best-effort,
// so a token whose row another transaction holds locked is answered at
// once (the bound only detects a wait for the lock; it is no performance
// target) and the row is stamped on a later request instead.
func TestLockedTokenRowDoesNotDelay(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var id int64
	if err := tx.QueryRow(ctx, `SELECT id FROM workspace_auth_tokens WHERE token_hash = sha256($1::bytea) FOR UPDATE`, []byte(tok)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := get(t, listURL(srv, ws.String()), tok)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answer with the token row locked took %s, want no wait for the lock", d.Round(time.Millisecond))
	}
	wantStatus(t, res, http.StatusOK)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sqlCount(t, srv, `SELECT count(*) FROM workspace_auth_tokens WHERE id = $1 AND last_used_at IS NOT NULL`, id); n != 0 {
		t.Fatalf("last_used_at stamped through a lock: got %d rows, want 0", n)
	}
	wantStatus(t, get(t, listURL(srv, ws.String()), tok), http.StatusOK)
	if n := sqlCount(t, srv, `SELECT count(*) FROM workspace_auth_tokens WHERE id = $1 AND last_used_at IS NOT NULL`, id); n != 1 {
		t.Fatalf("last_used_at after the lock went: got %d rows stamped, want 1", n)
	}
}
