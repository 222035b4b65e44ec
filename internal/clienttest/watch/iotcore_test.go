package watch_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/testkit/iotcoretest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
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
	t.Run("ThroughTheHintTable", func(t *testing.T) {
		// As the stack routes a hint: the store writes it to the hint
		// table, the relay publishes it from the table's stream.
		t.Parallel()
		r := newIoTRig(t)
		relayThroughTable(t, r)
		dir := t.TempDir()
		r.watch(t, dir, 10*time.Minute)
		ok200 := r.upload(t, "relayed.txt", []byte("relayed"))
		seen, ok := arrival(t, dir, "relayed.txt", 10*time.Second)
		if !ok {
			t.Fatalf("relayed.txt not in the folder 10s after its 200, with no poll due for 10 minutes; published %v, refusals %q",
				r.iot.PublishedMessages(), r.iot.Refusals())
		}
		t.Logf("relayed.txt arrived %s after its 200 (the stream polled every 250 ms)", seen.Sub(ok200).Round(time.Millisecond))
		if got := r.iot.PublishedMessages(); len(got) != 1 || got[0].Topic != push.Topic(r.ws) {
			t.Errorf("published through HTTPS Publish: %v, want the one hint on %s", got, push.Topic(r.ws))
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

// relayThroughTable routes r's hints as the stack does: the store writes
// each to a hint table (push.Table, moto's DynamoDB), and a pump hands
// the table's new stream records to the relay (push.Relay, as
// functions/pushrelay runs it) every 250 ms, as Lambda's event source
// mapping polls a shard four times a second; the relay publishes through
// the stand-in's HTTPS Publish, over TLS through its proxy.
func relayThroughTable(t *testing.T, r *rig) {
	t.Helper()
	ep := s3test.MustStart(t)
	table, stream := s3test.NewStreamTable(t, ep, push.AttrID)
	creds := credentials.NewStaticCredentialsProvider(s3test.AccessKeyID, s3test.SecretAccessKey, "")
	ddb := dynamodb.New(dynamodb.Options{Region: s3test.Region, BaseEndpoint: aws.String(ep.URL), Credentials: creds})
	r.srv.Store.Notifier = &push.Hints{Publisher: push.NewTable(ddb, table)}
	pub, err := push.NewIoT(r.iot.Endpoint(), aws.Config{Region: "us-east-1", Credentials: creds,
		HTTPClient: &http.Client{Transport: &http.Transport{Proxy: r.iot.Proxy, TLSClientConfig: &tls.Config{RootCAs: r.iot.RootCAs}}}})
	if err != nil {
		t.Fatal(err)
	}
	relay := &push.Relay{Publisher: pub}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			recs, err := stream.Next(ctx)
			if err != nil || len(recs) == 0 {
				continue
			}
			b, _ := json.Marshal(map[string]any{"Records": recs})
			var ev events.DynamoDBEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Errorf("the stream's records as Lambda's event: %v", err)
				return
			}
			_, _ = relay.Handle(ctx, ev)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}
