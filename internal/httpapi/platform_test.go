package httpapi_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// platformWorkspace inserts a workspace into the platform's own table, as
// the platform does, and a token for it minted the platform's way
// (base64url of 32 random bytes, no prefix of ours, a uuid id), keeping
// only its SHA-256.
func platformWorkspace(t *testing.T, srv *apptest.Server) (uuid.UUID, string) {
	t.Helper()
	ws := uuid.New()
	sqlExec(t, srv, `INSERT INTO workspaces (id, name) VALUES ($1, 'platform workspace')`, ws)
	return platformWorkspaceIn(t, srv, ws)
}

// platformWorkspaceIn mints a token the platform's way for the platform
// workspace ws.
func platformWorkspaceIn(t *testing.T, srv *apptest.Server, ws uuid.UUID) (uuid.UUID, string) {
	t.Helper()
	var raw [32]byte
	rand.Read(raw[:])
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(tok))
	sqlExec(t, srv, `INSERT INTO workspace_auth_tokens (workspace_id, token_hash, prefix) VALUES ($1, $2, $3)`, ws, sum[:], tok[:8])
	return ws, tok
}

// TestBesideThePlatform runs the service on the platform's database, with
// either of its CHECKs: a token the platform minted works on its own
// workspace and nowhere else; uploads write the activity rows the
// platform's feed reads; a row the platform's own server staged (no
// digest, no key) is listed with a null sha256, served byte-exact without
// a Content-Digest, and acked; an upload for a workspace the platform does
// not know is 404 with nothing stored.
func TestBesideThePlatform(t *testing.T) {
	t.Parallel()
	for _, cap100 := range []bool{false, true} {
		t.Run(fmt.Sprintf("Cap100MiB=%v", cap100), func(t *testing.T) {
			srv := apptest.NewServer(t, apptest.Options{Platform: true, Cap100MiB: cap100})
			ws, tok := platformWorkspace(t, srv)
			other, _ := platformWorkspace(t, srv)

			t.Run("PlatformTokenOnItsWorkspace", func(t *testing.T) {
				f := uploadParts(t, srv, ws.String(), tok, file("a.txt", "text/plain", "from the canvas"))[0]
				if n := sqlCount(t, srv, `SELECT count(*) FROM activity_logs WHERE workspace_id = $1 AND method = 'chat_upload_receive'
					AND request_body->>'file_id' = $2`, ws, f.FileID); n != 1 {
					t.Fatalf("activity rows for the upload: got %d, want 1", n)
				}
				res := get(t, contentURL(srv, ws.String(), f.FileID), tok)
				wantContent(t, res, []byte("from the canvas"), "text/plain", `attachment; filename="a.txt"; filename*=UTF-8''a.txt`)
				wantStatus(t, post(t, ackURL(srv, ws.String(), f.FileID), tok, "", nil), http.StatusOK)
			})
			t.Run("PlatformTokenRefusedOnAnother", func(t *testing.T) {
				wantError(t, get(t, listURL(srv, other.String()), tok), http.StatusUnauthorized, "invalid workspace auth token", nil)
			})
			t.Run("PlatformStagedRow", func(t *testing.T) {
				var id uuid.UUID
				data := []byte{0x00, 0xff, 'p', 'l', 'a', 't'}
				if err := srv.Pool.QueryRow(context.Background(), `
					INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, mimetype)
					VALUES ($1, $2, $3, 'old.bin', 'application/x-old') RETURNING file_id`, ws, data, len(data)).Scan(&id); err != nil {
					t.Fatal(err)
				}
				body := listQuery(t, srv, ws, tok, "")
				var found bool
				for _, u := range body.Uploads {
					if u.FileID == id.String() {
						found = true
						if u.SHA256 != nil {
							t.Errorf("sha256 of a row staged without one: got %q, want null", *u.SHA256)
						}
					}
				}
				if !found {
					t.Fatalf("list: %s not listed", id)
				}
				res := get(t, contentURL(srv, ws.String(), id.String()), tok)
				wantStatus(t, res, http.StatusOK)
				if string(res.body) != string(data) || res.header.Get("Content-Digest") != "" {
					t.Fatalf("content: got %x with Content-Digest %q, want %x and none", res.body, res.header.Get("Content-Digest"), data)
				}
				wantStatus(t, post(t, ackURL(srv, ws.String(), id.String()), tok, "", nil), http.StatusOK)
			})
			t.Run("UnknownWorkspace", func(t *testing.T) {
				unknown := uuid.New()
				body, ctype := form(t, file("a.txt", "text/plain", "lost"))
				wantError(t, post(t, uploadsURL(srv, unknown.String()), srv.AdminToken, ctype, body), http.StatusNotFound, "workspace not found", nil)
				wantNothingStored(t, srv, unknown)
			})
		})
	}
}

// TestStandaloneUnknownWorkspace: on the service's own database a
// workspace is known once a token was ever made for it (revoked or not);
// staging for one that is not, as a mistyped UUID, answers 404
// workspace_not_found and stores nothing, as the platform's database does
// (TestBesideThePlatform's UnknownWorkspace), multipart or committed
// after a presign; ACCEPT_UNKNOWN_WORKSPACES=true stages for any UUID.
func TestStandaloneUnknownWorkspace(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"ACCEPT_UNKNOWN_WORKSPACES": "false"}})
	body, ctype := form(t, file("a.txt", "text/plain", "for a workspace"))

	t.Run("Multipart", func(t *testing.T) {
		typo := uuid.New()
		wantError(t, post(t, uploadsURL(srv, typo.String()), srv.AdminToken, ctype, body), http.StatusNotFound, "workspace not found", nil)
		wantNothingStored(t, srv, typo)
	})
	t.Run("Commit", func(t *testing.T) {
		typo := uuid.New()
		base := srv.URL + "/workspaces/" + typo.String()
		var pre presignAnswer
		decode(t, apiReq(t, "POST", base+"/chat/uploads/presign", srv.AdminToken, "application/json",
			strings.NewReader(`{"files":[{"name":"a.bin","size":1000}]}`)), 200, &pre)
		putObject(t, pre.Uploads[0].URL, pre.Uploads[0].Headers, make([]byte, 1000))
		res := apiReq(t, "POST", base+"/chat/uploads", srv.AdminToken, "application/json",
			strings.NewReader(`{"files":[{"upload_id":"`+pre.Uploads[0].UploadID+`"}]}`))
		var got map[string]any
		decode(t, res, http.StatusNotFound, &got)
		if got["code"] != "workspace_not_found" {
			t.Errorf("commit for an unknown workspace: got %v, want workspace_not_found", got)
		}
		wantNothingStored(t, srv, typo)
		if n := sqlCount(t, srv, "SELECT count(*) FROM presigned_uploads WHERE workspace_id = $1 AND file_id IS NOT NULL", typo); n != 0 {
			t.Errorf("claimed uploads: got %d, want 0", n)
		}
	})
	t.Run("KnownByAToken", func(t *testing.T) {
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		wantStatus(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, body), http.StatusOK)
		wantStatus(t, post(t, uploadsURL(srv, ws.String()), tok, ctype, body), http.StatusOK)
		sqlExec(t, srv, `UPDATE workspace_auth_tokens SET revoked_at = now() WHERE workspace_id = $1`, ws)
		wantStatus(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, body), http.StatusOK)
	})
	t.Run("AcceptUnknown", func(t *testing.T) {
		open := apptest.NewServer(t, apptest.Options{Env: map[string]string{"ACCEPT_UNKNOWN_WORKSPACES": "true"}})
		wantStatus(t, post(t, uploadsURL(open, uuid.NewString()), open.AdminToken, ctype, body), http.StatusOK)
	})
}
