// Package pgfreeze_test freezes Postgres (SIGSTOP on the server and its
// backends: connections stay open and nothing answers, as on a hung host)
// under a running service. It has a test binary, and so a throwaway
// cluster, of its own: freezing it cannot stall another package's tests.
package pgfreeze_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/faultkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestPostgresFrozen: while Postgres is frozen, every route answers a 503
// with the unavailable JSON within 15 s (no statement_timeout can fire on
// a frozen server: the request's own deadline must end the wait), the
// service recovers after the thaw, and an upload answered 503 while frozen
// stores nothing, not even when the server resumes and runs what was
// waiting in its sockets. An upload in flight at the instant of the freeze
// may go either way, but never halfway.
func TestPostgresFrozen(t *testing.T) {
	cluster := pgtest.Cluster(t)
	if cluster == nil {
		t.Skip("TEST_DATABASE_URL is set: no cluster of our own to freeze")
	}
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	wsTok := srv.WorkspaceToken(t, ws)
	base := srv.URL + "/workspaces/" + ws.String()
	fileID := upload(t, srv.AdminToken, base, "kept.txt")
	ackID := upload(t, srv.AdminToken, base, "acked.txt")

	named := func(prefix string) func(int) (string, []byte) {
		return func(n int) (string, []byte) {
			body, ctype := faultkit.Multipart(faultkit.File{Name: fmt.Sprintf("%s-%d.txt", prefix, n), Type: "text/plain", Content: []byte("hello")})
			return ctype, body
		}
	}
	calls := []faultkit.Call{
		{Name: "upload", Method: "POST", URL: base + "/chat/uploads", Token: srv.AdminToken, Body: named("admin"), NeedsFrozen: true},
		{Name: "upload-ws", Method: "POST", URL: base + "/chat/uploads", Token: wsTok, Body: named("ws"), NeedsFrozen: true},
		{Name: "list", Method: "GET", URL: base + "/pending-uploads", Token: wsTok, NeedsFrozen: true},
		{Name: "list-admin", Method: "GET", URL: base + "/pending-uploads", Token: srv.AdminToken, NeedsFrozen: true},
		{Name: "content", Method: "GET", URL: base + "/pending-uploads/" + fileID + "/content", Token: wsTok, NeedsFrozen: true},
		{Name: "ack-admin", Method: "POST", URL: base + "/pending-uploads/" + ackID + "/ack", Token: srv.AdminToken, NeedsFrozen: true},
	}
	sent := faultkit.Frozen(t, calls, pgtest.Freeze, pgtest.Thaw)

	// What is stored, by file name, once the server has run whatever
	// waited in its sockets.
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows := names(ctx, t, srv, `SELECT filename FROM pending_uploads WHERE workspace_id = $1`, ws)
	acts := names(ctx, t, srv, `SELECT request_body->>'name' FROM activity_logs WHERE workspace_id = $1`, ws)
	for name := range rows {
		if !acts[name] {
			t.Errorf("%s: a row without its activity row", name)
		}
	}
	for name := range acts {
		if !rows[name] {
			t.Errorf("%s: an activity row without its row", name)
		}
	}
	prefix := map[string]string{"upload": "admin", "upload-ws": "ws"}
	for _, s := range sent {
		p, ok := prefix[s.Call]
		if !ok {
			continue
		}
		name := fmt.Sprintf("%s-%d.txt", p, s.N)
		switch {
		case s.OK() && !rows[name]:
			t.Errorf("%s: answered 200, not stored", name)
		case !s.OK() && s.DuringFreeze && rows[name]:
			t.Errorf("%s: answered %d while frozen, yet stored", name, s.Res.Status)
		}
	}
}

func upload(t *testing.T, token, base, name string) string {
	t.Helper()
	body, ctype := faultkit.Multipart(faultkit.File{Name: name, Type: "text/plain", Content: []byte("hello")})
	res, err := faultkit.Do(&http.Client{}, 30*time.Second, "POST", base+"/chat/uploads", token, ctype, body)
	if err != nil || res.Status != 200 {
		t.Fatalf("upload: %d %s %v", res.Status, res.Body, err)
	}
	var staged struct {
		Files []struct {
			FileID string `json:"file_id"`
		} `json:"files"`
	}
	if err := json.Unmarshal(res.Body, &staged); err != nil || len(staged.Files) != 1 {
		t.Fatalf("upload body %s: %v", res.Body, err)
	}
	return staged.Files[0].FileID
}

func names(ctx context.Context, t *testing.T, srv *apptest.Server, q string, ws uuid.UUID) map[string]bool {
	t.Helper()
	rows, err := srv.Pool.Query(ctx, q, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[n] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
