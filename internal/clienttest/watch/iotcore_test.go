package watch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/testkit/iotcoretest"
)

// newIoTRig is the rig with AWS IoT Core's stand-in as the broker: the
// authorizer is push.Authorizer over the rig's store (the API's own token
// look-up), and GET /uploads/limits announces the stand-in's endpoint as
// the deployed functions do (httpapi.PushOf of PUSH_ENDPOINT and
// PUSH_AUTHORIZER).
func newIoTRig(t *testing.T) *rig {
	t.Helper()
	r := newRig(t)
	r.iot = iotcoretest.Start(t, iotcoretest.Options{Authorizer: "pendinguploads-push", Authorize: push.NewAuthorizer(r.srv.Store).Handle})
	r.srv.App.API.Limits.Push = httpapi.PushOf(config.Config{PushEndpoint: r.iot.Endpoint(), PushAuthorizer: "pendinguploads-push"})
	return r
}

// TestWatchThroughIoTCore runs pull --watch's connection (client/watch,
// as pendingctl runs it, with the subscription GET /uploads/limits
// announces) against a stand-in that holds it to AWS IoT Core's
// custom-authentication rules (internal/testkit/iotcoretest): it is
// accepted as it is, nothing refused, and a hint published through the
// stand-in brings an upload into the folder, with a fallback far too long
// to have found it (how soon is logged: a loaded machine is no measure of
// latency). A token the authorizer does
// not know is refused, and the watcher says it is reconnecting.
func TestWatchThroughIoTCore(t *testing.T) {
	t.Parallel()
	t.Run("Accepted", func(t *testing.T) {
		t.Parallel()
		r := newIoTRig(t)
		dir := t.TempDir()
		r.watch(t, dir, 10*time.Minute)
		ok200 := r.upload(t, "hinted.txt", []byte("hinted"))
		seen, ok := arrival(t, dir, "hinted.txt", 10*time.Second)
		if !ok {
			t.Fatalf("hinted.txt not in the folder 10s after its 200, with no poll due for 10 minutes; stand-in refusals %q", r.iot.Refusals())
		}
		t.Logf("hinted.txt arrived %s after its 200", seen.Sub(ok200).Round(time.Millisecond))
		if got := r.iot.Refusals(); len(got) > 0 {
			t.Errorf("the stand-in refused %q; want the connection accepted as it is", got)
		}
	})
	t.Run("UnknownToken", func(t *testing.T) {
		t.Parallel()
		r := newIoTRig(t)
		r.token = "not-a-token-of-this-workspace-000000"
		st := watchUntilReconnecting(t, r)
		if got := r.iot.Refusals(); len(got) == 0 || !strings.Contains(got[0], "did not authenticate") {
			t.Errorf("stand-in refusals %q, want the authorizer's", got)
		}
		if st.count("connected") > 0 {
			t.Error("the watcher says connected with a token the authorizer refused")
		}
	})
}

// watchUntilReconnecting starts r's watcher and waits (10 s at most) for
// its first "reconnecting" line.
func watchUntilReconnecting(t *testing.T, r *rig) *statusLog {
	t.Helper()
	st, _ := r.startWatch(t, t.TempDir(), 10*time.Minute, "")
	deadline := time.Now().Add(10 * time.Second)
	for st.count("push: ") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not say it is reconnecting within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return st
}
