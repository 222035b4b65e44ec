package browsertest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/faultkit"
)

// pausedFor is how long the service's database refuses connections once
// an ack of the test reaches the service: longer than the default
// attempts' backoff (under a second in all), shorter than the waits two
// of the service's Retry-After (5 s) ask.
const pausedFor = 6 * time.Second

// TestBrowserWaitsOutPausedDatabase runs the client in Chromium against
// the service whose database pauses (pgpause refusing every connection,
// its pool emptied, as a database resuming from its pause does) when an
// ack reaches it: the service answers 503 with Retry-After: 5, which the
// page can read across origins (CORS exposes it) and the client carries
// on its error (retryAfterMs); the ack, retried as it is safe to repeat,
// waits as long as the service asks and is served after the resume
// instead of failing with the 503 after its three quick tries.
func TestBrowserWaitsOutPausedDatabase(t *testing.T) {
	chromium, node := requireBrowser(t)
	page := pageServer(t)
	srv := apptest.NewServer(t, apptest.Options{DBPause: true, Env: map[string]string{"CORS_ALLOWED_ORIGINS": page.URL}})
	ws := uuid.New()
	token := srv.WorkspaceToken(t, ws)
	once, waited := stage(t, srv, ws, "once.txt"), stage(t, srv, ws, "waited.txt")

	// The first ack of each file pauses the database as it arrives.
	var paused sync.Map
	var unavailable atomic.Int64
	mux := srv.App.API.Mux()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/ack") {
			if _, again := paused.LoadOrStore(r.URL.Path, true); !again {
				srv.App.Pool.Reset()
				srv.DBPause.PauseFor(pausedFor)
			}
			rec := &statusRecorder{ResponseWriter: w}
			mux.ServeHTTP(rec, r)
			if rec.status == http.StatusServiceUnavailable {
				unavailable.Add(1)
			}
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)

	out := driveSteps(t, node, chromium, []step{
		{Name: "once", Page: page.URL + "/index.html", Fn: "ackFile", Args: map[string]any{
			"api": api.URL, "token": token, "ws": ws.String(), "fileId": once, "attempts": 1}},
		{Name: "waited", Page: page.URL + "/index.html", Fn: "ackFile", Args: map[string]any{
			"api": api.URL, "token": token, "ws": ws.String(), "fileId": waited}},
	})
	type ackResult struct {
		OK     bool     `json:"ok"`
		Error  *jsError `json:"error"`
		Result struct {
			Acked bool `json:"acked"`
		} `json:"result"`
	}
	var res struct{ Once, Waited ackResult }
	decodeSteps(t, out, &res)

	// One try, while paused: the 503, with the Retry-After the page read.
	if e := res.Once.Error; res.Once.OK || e == nil || e.Code != "http" || e.Status != http.StatusServiceUnavailable {
		t.Fatalf("an ack of one try while paused: got %+v, want code http, status 503", res.Once)
	}
	if e := res.Once.Error; e.RetryAfterMs == nil || *e.RetryAfterMs != 5000 {
		t.Errorf("the 503's retryAfterMs: got %v, want 5000 (the service's Retry-After: 5, read across origins)", e.RetryAfterMs)
	}
	// The default tries: waited out.
	if !res.Waited.OK || !res.Waited.Result.Acked {
		t.Errorf("an ack started while paused: got %+v (error %+v), want acked after the resume", res.Waited, res.Waited.Error)
	}
	if unavailable.Load() < 2 {
		t.Errorf("the service answered %d 503s, want one for each ack at least: the pause did not reach it", unavailable.Load())
	}
	if srv.DBPause.Refused() == 0 {
		t.Error("the pause refused no connection: the service's pool did not go through it")
	}
}

// stage stages one small file for ws as the admin and returns its id.
func stage(t *testing.T, srv *apptest.Server, ws uuid.UUID, name string) string {
	t.Helper()
	body, ctype := faultkit.Multipart(faultkit.File{Name: name, Type: "text/plain", Content: []byte(name)})
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/workspaces/"+ws.String()+"/chat/uploads", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Files []struct {
			FileID string `json:"file_id"`
		} `json:"files"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK || len(v.Files) != 1 {
		t.Fatalf("stage %s: %d %v %+v", name, resp.StatusCode, err, v)
	}
	return v.Files[0].FileID
}

// statusRecorder notes the status a handler answers with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
