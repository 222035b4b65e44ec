package faulttest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/faultkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// pauseFor is how long the database refuses connections: shorter than
// one Retry-After, so that the second try of each request is served.
const pauseFor = 3 * time.Second

// TestDatabasePausedThenResumes: the service's database refuses new
// connections for a while before the first request (pgpause: a database
// restarting, failing over, or an Aurora Serverless v2 resuming from its
// pause), its pool empty, before a request. An upload and a list answer 503 unavailable with Retry-After,
// never a 500, and the upload stores nothing; each sent again after
// Retry-After, as a client does, is answered 200, and the file is
// stored once: no upload lost, none twice.
func TestDatabasePausedThenResumes(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{DBPause: true})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	base := srv.URL + "/workspaces/" + ws.String()
	body, ctype := faultkit.Multipart(faultkit.File{Name: "a.txt", Type: "text/plain", Content: []byte("after the pause")})

	for _, req := range []struct {
		name, method, url, token, ctype string
		body                            []byte
	}{
		{"Upload", "POST", base + "/chat/uploads", srv.AdminToken, ctype, body},
		{"List", "GET", base + "/pending-uploads", tok, "", nil},
	} {
		// No connection is left in the pool, as none is to a paused
		// database (it pauses only without one).
		srv.App.Pool.Reset()
		srv.DBPause.PauseFor(pauseFor)
		var statuses []int
		for try := 0; try < 5; try++ {
			status, retryAfter, answer := send(t, req.method, req.url, req.token, req.ctype, req.body)
			statuses = append(statuses, status)
			if status == http.StatusOK {
				break
			}
			if status != http.StatusServiceUnavailable {
				t.Fatalf("%s, try %d: got %d %s, want 503 or 200", req.name, try, status, answer)
			}
			wantError(t, faultkit.Response{Status: status, Body: answer}, 503, "storage unavailable, retry shortly", "unavailable")
			secs, err := strconv.Atoi(retryAfter)
			if err != nil || secs < 1 || secs > 30 {
				t.Fatalf("%s, try %d: 503 with Retry-After %q, want whole seconds, 1 to 30", req.name, try, retryAfter)
			}
			if req.name == "Upload" {
				if n := count(t, srv.Pool, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws); n != 0 {
					t.Fatalf("a 503 stored %d files", n)
				}
			}
			time.Sleep(time.Duration(secs) * time.Second)
		}
		if statuses[0] != http.StatusServiceUnavailable || statuses[len(statuses)-1] != http.StatusOK {
			t.Errorf("%s: answers %v, want 503 while paused, then 200", req.name, statuses)
		}
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws); n != 1 {
		t.Errorf("after the pause: %d files stored, want 1", n)
	}
	if srv.DBPause.Refused() == 0 {
		t.Error("the pause refused no connection: the service's pool did not go through it")
	}
}

// TestDatabaseResumingHoldsTheConnect: the service's database takes a
// new connection and answers nothing until it has resumed (pgpause's
// hold: Aurora's endpoint may hold a connection while its instance
// resumes, rather than refuse it). A hold shorter than the pool's connect
// timeout (app.DefaultConnectTimeout) is waited for: the upload is
// answered 200 after it, stored once. A longer one answers 503 with
// Retry-After, never a 500, and stores nothing; sent again after the
// hold, it is stored once.
func TestDatabaseResumingHoldsTheConnect(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{DBPause: true})
	ws := uuid.New()
	url := srv.URL + "/workspaces/" + ws.String() + "/chat/uploads"
	upload := func(name string) (int, string, []byte) {
		body, ctype := faultkit.Multipart(faultkit.File{Name: name, Type: "text/plain", Content: []byte(name)})
		return send(t, "POST", url, srv.AdminToken, ctype, body)
	}
	stored := func() int {
		return count(t, srv.Pool, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws)
	}

	srv.App.Pool.Reset() // no connection left, as none is to a paused database
	srv.DBPause.HoldFor(app.DefaultConnectTimeout / 2)
	if status, _, answer := upload("short.txt"); status != http.StatusOK {
		t.Fatalf("a hold shorter than the connect timeout: got %d %s, want 200 after it", status, answer)
	}
	if srv.DBPause.Held() == 0 {
		t.Fatal("the hold held no connection: the service's pool did not go through it")
	}
	if n := stored(); n != 1 {
		t.Fatalf("after the short hold: %d files stored, want 1", n)
	}

	srv.App.Pool.Reset()
	hold := app.DefaultConnectTimeout + 2*time.Second
	srv.DBPause.HoldFor(hold)
	end := time.Now().Add(hold)
	status, retryAfter, answer := upload("long.txt")
	if status != http.StatusServiceUnavailable {
		t.Fatalf("a hold longer than the connect timeout: got %d %s, want 503", status, answer)
	}
	wantError(t, faultkit.Response{Status: status, Body: answer}, 503, "storage unavailable, retry shortly", "unavailable")
	if secs, err := strconv.Atoi(retryAfter); err != nil || secs < 1 || secs > 30 {
		t.Fatalf("503 with Retry-After %q, want whole seconds, 1 to 30", retryAfter)
	}
	if n := stored(); n != 1 {
		t.Fatalf("a 503 stored a file: %d stored, want 1", n)
	}
	time.Sleep(time.Until(end))
	if status, _, answer := upload("long.txt"); status != http.StatusOK {
		t.Fatalf("sent again after the hold: got %d %s, want 200", status, answer)
	}
	if n := stored(); n != 2 {
		t.Errorf("after the long hold: %d files stored, want 2", n)
	}
}

// send sends one request and returns its status, Retry-After and body.
func send(t *testing.T, method, url, token, ctype string, body []byte) (int, string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), reqTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header.Get("Retry-After"), b
}

// TestIdleSessionClosedByTheServer: the service's sessions carry
// idle_session_timeout (app.DefaultIdleSessionTimeout; here 1 s, from the
// URL), so the server itself closes one left idle, as a frozen Lambda
// sandbox leaves its pool's: no session keeps a database that pauses when
// idle awake. The service's next request is served on a new connection,
// 200, not a 503 of the dead one.
func TestIdleSessionClosedByTheServer(t *testing.T) {
	t.Parallel()
	url := pgtest.MustURL(t)
	srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"DATABASE_URL": url + "&idle_session_timeout=1000"}})
	own, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	ws := uuid.New()
	upload := func(name string) {
		t.Helper()
		body, ctype := faultkit.Multipart(faultkit.File{Name: name, Type: "text/plain", Content: []byte(name)})
		if status, _, answer := send(t, "POST", srv.URL+"/workspaces/"+ws.String()+"/chat/uploads", srv.AdminToken, ctype, body); status != http.StatusOK {
			t.Fatalf("upload %s: got %d %s, want 200", name, status, answer)
		}
	}
	upload("before.txt")
	const sessions = `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pendinguploads'`
	if n := count(t, own, sessions); n == 0 {
		t.Fatal("no session of the service after its upload")
	}
	n := -1
	for range 100 { // the server ends them a second after their last statement
		if n = count(t, own, sessions); n == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n != 0 {
		t.Fatalf("%d sessions of the service still open, idle past idle_session_timeout", n)
	}
	upload("after.txt")
	if n := count(t, own, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws); n != 2 {
		t.Errorf("%d files stored, want 2", n)
	}
}
