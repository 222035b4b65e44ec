package watch_test

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/inbox"
	"github.com/pendinguploads/pendinguploads/client/watch"
	"github.com/pendinguploads/pendinguploads/internal/clienttest/clientkit"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/push/localbroker"
	"github.com/pendinguploads/pendinguploads/internal/testkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/iotcoretest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// rig is the whole service (apptest) behind a loopback server that
// counts list calls, a local broker (restartable on its port) that the
// store publishes its hints to, and one workspace with a token.
type rig struct {
	srv   *apptest.Server
	url   string
	lists atomic.Int64
	// pollURL, when set, is where the watcher lists (a second door to
	// the same service, counting its own list calls in pollLists).
	pollURL   string
	pollLists atomic.Int64
	verify    push.Verifier
	addr      string
	broker    atomic.Pointer[localbroker.Broker]
	ws        uuid.UUID
	token     string
	admin     *client.Client
	// iot, when set, is the broker instead: IoT Core's stand-in, which
	// the store publishes to and the watcher reaches through its proxy.
	iot *iotcoretest.Server
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{srv: apptest.NewServer(t, apptest.Options{}), ws: uuid.New()}
	r.verify = r.srv.Store
	r.startBroker(t, "127.0.0.1:0")
	t.Cleanup(func() { r.stopBroker() })
	r.srv.Store.Notifier = &push.Hints{Publisher: r}
	r.srv.App.API.Limits.Push = &httpapi.Push{URL: r.broker.Load().URL(), TopicTemplate: push.TopicTemplate}
	mux := r.srv.App.API.Mux()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pending-uploads") {
			r.lists.Add(1)
		}
		mux.ServeHTTP(w, req)
	}))
	t.Cleanup(hs.Close)
	r.url = hs.URL
	poll := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.pollLists.Add(1)
		mux.ServeHTTP(w, req)
	}))
	t.Cleanup(poll.Close)
	r.pollURL = poll.URL
	r.token = r.srv.WorkspaceToken(t, r.ws)
	r.admin = clientkit.MustClient(t, r.url, r.srv.AdminToken)
	return r
}

func (r *rig) startBroker(t *testing.T, addr string) {
	t.Helper()
	b, err := localbroker.Start(addr, r.verify, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r.addr = b.Addr()
	r.broker.Store(b)
}

func (r *rig) stopBroker() {
	if b := r.broker.Swap(nil); b != nil {
		_ = b.Close()
	}
}

// Publish is the store's publisher: the broker running now, if any.
func (r *rig) Publish(ctx context.Context, topic string, payload []byte) error {
	if r.iot != nil {
		return r.iot.Publish(ctx, topic, payload)
	}
	b := r.broker.Load()
	if b == nil {
		return errors.New("broker down")
	}
	return b.Publish(ctx, topic, payload)
}

// statusLog keeps the watcher's status lines.
type statusLog struct {
	mu    sync.Mutex
	lines []string
}

func (s *statusLog) add(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, line)
}

func (s *statusLog) count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// watch runs a watcher of the rig's workspace into dir, as pendingctl
// pull --watch does, until the test ends.
func (r *rig) watch(t *testing.T, dir string, fallback time.Duration) *statusLog {
	return r.watchListingAt(t, dir, fallback, "")
}

// watchListingAt is watch with the list calls sent to listURL (the
// poll's own door), when set.
func (r *rig) watchListingAt(t *testing.T, dir string, fallback time.Duration, listURL string) *statusLog {
	t.Helper()
	st, pulls := r.startWatch(t, dir, fallback, listURL)
	deadline := time.Now().Add(10 * time.Second)
	for st.count("connected") == 0 || pulls.Load() == 0 {
		if time.Now().After(deadline) {
			if r.iot != nil {
				t.Fatalf("watcher not connected, or its first pull not done, within 10s; IoT Core's stand-in refused: %q", r.iot.Refusals())
			}
			t.Fatal("watcher not connected, or its first pull not done, within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return st
}

// startWatch starts the watcher of watchListingAt, and returns its
// status lines and its count of pulls at once.
func (r *rig) startWatch(t *testing.T, dir string, fallback time.Duration, listURL string) (*statusLog, *atomic.Int64) {
	t.Helper()
	c := clientkit.MustClient(t, r.url, r.token)
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := c.PushSubscription(ctx, r.ws)
	if err != nil {
		t.Fatal(err)
	}
	p := inbox.New(c, r.ws, dir)
	if listURL != "" {
		p.Lister = clientkit.MustClient(t, listURL, r.token)
	}
	st := &statusLog{}
	pulls := new(atomic.Int64)
	var roots *x509.CertPool
	var proxy func(*http.Request) (*url.URL, error)
	if r.iot != nil {
		roots, proxy = r.iot.RootCAs, r.iot.Proxy
	}
	w := &watch.Watcher{
		RootCAs:    roots,
		Proxy:      proxy,
		Sub:        sub,
		Fallback:   fallback,
		MinBackoff: 100 * time.Millisecond,
		MaxBackoff: 400 * time.Millisecond,
		Status: func(line string) {
			st.add(line)
			t.Logf("%s watch: %s", time.Now().Format("15:04:05.000"), line)
		},
		Pull: func(ctx context.Context) error {
			if _, err := p.Pull(ctx); err != nil && ctx.Err() == nil {
				t.Logf("pull: %v", err)
			}
			pulls.Add(1)
			return nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("watcher: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("watcher did not stop within 5s of its context")
		}
	})
	return st, pulls
}

// upload stages one file named name through the API and returns when its
// 200 came.
func (r *rig) upload(t *testing.T, name string, content []byte) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.admin.Upload(ctx, r.ws, []client.UploadFile{client.BytesFile(name, "", content)}); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// arrival waits up to limit for dir/name and returns when it was seen.
func arrival(t *testing.T, dir, name string, limit time.Duration) (time.Time, bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return time.Now(), true
		}
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(2 * time.Millisecond)
	}
}
