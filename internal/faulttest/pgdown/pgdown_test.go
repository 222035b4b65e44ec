// Package pgdown_test stops Postgres under a running service. It has a
// test binary, and so a throwaway cluster, of its own: stopping the
// cluster here cannot break another package's tests.
package pgdown_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/faultkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const (
	// answerBound is how long any one request may take while the
	// database is down: the pool's connect timeout is 5 s.
	answerBound = 15 * time.Second
	// clientTimeout only keeps a hang from hanging the test.
	clientTimeout = 30 * time.Second
)

// TestPostgresStopped stops the database while workers make requests
// through a running server: every answer is a 200 (begun before the stop)
// or a 503 with the unavailable JSON, within answerBound, never a hang or a
// 500. After a restart of the database, the same server answers 200 again.
func TestPostgresStopped(t *testing.T) {
	cluster := pgtest.Cluster(t)
	if cluster == nil {
		t.Skip("TEST_DATABASE_URL is set: no cluster of our own to stop")
	}
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	wsTok := srv.WorkspaceToken(t, ws)
	client := &http.Client{}
	base := srv.URL + "/workspaces/" + ws.String()

	body, ctype := faultkit.Multipart(faultkit.File{Name: "a.txt", Type: "text/plain", Content: []byte("hello")})
	res, err := faultkit.Do(client, clientTimeout, "POST", base+"/chat/uploads", srv.AdminToken, ctype, body)
	if err != nil || res.Status != 200 {
		t.Fatalf("upload before the stop: %d %s %v", res.Status, res.Body, err)
	}
	var staged struct {
		Files []struct {
			FileID string `json:"file_id"`
		} `json:"files"`
	}
	if err := json.Unmarshal(res.Body, &staged); err != nil || len(staged.Files) != 1 {
		t.Fatalf("upload body %s: %v", res.Body, err)
	}
	fileID := staged.Files[0].FileID

	type call struct {
		name, method, url, token, ctype string
		body                            []byte
	}
	calls := []call{
		{"upload", "POST", base + "/chat/uploads", srv.AdminToken, ctype, body},
		{"list", "GET", base + "/pending-uploads", wsTok, "", nil},
		{"list-admin", "GET", base + "/pending-uploads", srv.AdminToken, "", nil},
		{"content", "GET", base + "/pending-uploads/" + fileID + "/content", wsTok, "", nil},
		{"content-admin", "GET", base + "/pending-uploads/" + fileID + "/content", srv.AdminToken, "", nil},
	}

	var (
		stopped   atomic.Bool // set once the cluster is fully down
		quit      = make(chan struct{})
		mu        sync.Mutex
		failures  []string
		after503  = map[string]int{}
		totalSent atomic.Int64
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			for {
				select {
				case <-quit:
					return
				default:
				}
				wasDown := stopped.Load()
				res, err := faultkit.Do(client, clientTimeout, c.method, c.url, c.token, c.ctype, c.body)
				totalSent.Add(1)
				if err != nil {
					fail("%s: no answer after %s: %v", c.name, res.Elapsed.Round(time.Millisecond), err)
					continue
				}
				if res.Elapsed > answerBound {
					fail("%s: answered %d after %s, want within %s", c.name, res.Status, res.Elapsed.Round(time.Millisecond), answerBound)
				}
				switch {
				case res.Status == 200 && !wasDown:
				case res.Status == 503:
					if msg := checkUnavailable(res.Body); msg != "" {
						fail("%s: 503 body %s: %s", c.name, res.Body, msg)
					}
					if wasDown {
						mu.Lock()
						after503[c.name]++
						mu.Unlock()
					}
				default:
					fail("%s: got %d %s (database down: %v), want 503", c.name, res.Status, res.Body, wasDown)
				}
			}
		})
	}

	time.Sleep(300 * time.Millisecond) // requests in flight
	restarted := false
	t.Cleanup(func() {
		if !restarted { // the cleanups (DROP DATABASE) need it running
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = cluster.Restart(ctx)
		}
	})
	cluster.Stop()
	stopped.Store(true)
	time.Sleep(2 * time.Second) // requests against a stopped database
	close(quit)
	wg.Wait()

	for _, f := range failures {
		t.Error(f)
	}
	for _, c := range calls {
		if after503[c.name] == 0 {
			t.Errorf("%s: no 503 answered while the database was down", c.name)
		}
	}
	t.Logf("%d requests; 503s while down: %v", totalSent.Load(), after503)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	restarted = true

	// The same server, not restarted, recovers: the first request may still
	// meet a connection the restart killed, so allow a few seconds.
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range calls {
		for {
			res, err := faultkit.Do(client, clientTimeout, c.method, c.url, c.token, c.ctype, c.body)
			if err == nil && res.Status == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after the restart: %d %s %v, want 200", c.name, res.Status, res.Body, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	res, err = faultkit.Do(client, clientTimeout, "POST", base+"/pending-uploads/"+fileID+"/ack", wsTok, "", nil)
	if err != nil || res.Status != 200 {
		t.Fatalf("ack after the restart: %d %s %v", res.Status, res.Body, err)
	}
}

// checkUnavailable returns what is wrong with a 503 body, or "".
func checkUnavailable(b []byte) string {
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return "not JSON: " + err.Error()
	}
	if e.Code != "unavailable" {
		return fmt.Sprintf("code %q, want unavailable", e.Code)
	}
	switch e.Error {
	case "storage unavailable, retry shortly":
		return ""
	}
	return fmt.Sprintf("error %q", e.Error)
}
