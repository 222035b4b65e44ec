package localbroker_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/push/localbroker"
	"github.com/pendinguploads/pendinguploads/internal/testkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// serve starts the service and a broker whose hints the store publishes.
func serve(t *testing.T) (*apptest.Server, *localbroker.Broker) {
	t.Helper()
	srv := apptest.NewServer(t, apptest.Options{})
	b, err := localbroker.Start("127.0.0.1:0", srv.Store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	srv.Store.Notifier = &push.Hints{Publisher: b}
	return srv, b
}

// dial connects a real MQTT client with these credentials.
func dial(t *testing.T, b *localbroker.Broker, username, password, clientID string) (mqtt.Client, error) {
	t.Helper()
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(b.URL()).SetClientID(clientID).
		SetUsername(username).SetPassword(password).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second))
	tok := c.Connect()
	if !tok.WaitTimeout(10 * time.Second) {
		t.Fatal("connect: no answer within 10s")
	}
	if err := tok.Error(); err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Disconnect(0) })
	return c, nil
}

// subscribe subscribes c to topic and returns the broker's grant (0..2,
// or 0x80 refused) and the messages it then receives.
func subscribe(t *testing.T, c mqtt.Client, topic string) (byte, <-chan []byte) {
	t.Helper()
	msgs := make(chan []byte, 16)
	tok := c.Subscribe(topic, 0, func(_ mqtt.Client, m mqtt.Message) { msgs <- m.Payload() })
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", topic, tok.Error())
	}
	return tok.(*mqtt.SubscribeToken).Result()[topic], msgs
}

// TestPushTokenOfAnotherWorkspaceIsRefused: workspace A's token
// subscribes to A's topic and nothing else: B's topic and a wildcard are
// refused at subscribe; A's token under B's id, a revoked, an unknown or
// the admin token, and a client id not A's are refused at connect; a
// client's own publish reaches no one.
func TestPushTokenOfAnotherWorkspaceIsRefused(t *testing.T) {
	t.Parallel()
	srv, b := serve(t)
	a, bws := uuid.New(), uuid.New()
	tokA := srv.WorkspaceToken(t, a)
	_ = srv.WorkspaceToken(t, bws)

	ca, err := dial(t, b, a.String(), tokA, a.String()+"-x1")
	if err != nil {
		t.Fatalf("A's token as A: %v", err)
	}
	for _, topic := range []string{push.Topic(bws), "pendinguploads/+/uploads", "#", "pendinguploads/" + a.String() + "/#"} {
		if got, _ := subscribe(t, ca, topic); got != 0x80 {
			t.Errorf("A's token subscribing to %s: got grant %#x, want 0x80 (refused)", topic, got)
		}
	}
	got, msgs := subscribe(t, ca, push.Topic(a))
	if got != 0 {
		t.Fatalf("A's token subscribing to A's topic: got grant %#x, want 0", got)
	}

	// A client may not publish, not even on its own topic: the subscriber
	// hears nothing of it, and then does hear the service's hint.
	if tok := ca.Publish(push.Topic(a), 0, false, []byte(`{"forged":true}`)); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	select {
	case m := <-msgs:
		t.Fatalf("a client's own publish was delivered: %s", m)
	case <-time.After(300 * time.Millisecond):
	}
	if err := b.Publish(context.Background(), push.Topic(a), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-msgs:
	case <-time.After(5 * time.Second):
		t.Fatal("the service's publish on A's topic did not reach A's subscriber")
	}

	revoked := srv.WorkspaceToken(t, a)
	if _, err := admin.RevokeToken(context.Background(), srv.Pool, a, revoked); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, user, pass, id string }{
		{"A's token as B", bws.String(), tokA, bws.String() + "-x2"},
		{"a revoked token", a.String(), revoked, a.String() + "-x3"},
		{"an unknown token", a.String(), "pu_not-a-token", a.String() + "-x4"},
		{"the admin token", a.String(), srv.AdminToken, a.String() + "-x5"},
		{"no token", a.String(), "", a.String() + "-x6"},
		{"a client id of B's", a.String(), tokA, bws.String()},
		{"a client id with a wildcard", a.String(), tokA, a.String() + "-*"},
		{"a username that is no workspace", "admin", tokA, a.String() + "-x7"},
	} {
		if _, err := dial(t, b, c.user, c.pass, c.id); err == nil {
			t.Errorf("%s: connected, want refused", c.name)
		}
	}
}

// TestPushHintNamesNoFile: the hint of an upload carries the workspace's
// and the file's ids and nothing else: not the file's name, type or size,
// and none of its bytes (raw, hex or base64).
func TestPushHintNamesNoFile(t *testing.T) {
	t.Parallel()
	srv, b := serve(t)
	ws := uuid.New()
	c, err := dial(t, b, ws.String(), srv.WorkspaceToken(t, ws), ws.String())
	if err != nil {
		t.Fatal(err)
	}
	_, msgs := subscribe(t, c, push.Topic(ws))

	const name = "quarterly-secret-plan.pdf"
	content := []byte("CONFIDENTIAL-BYTES-0123456789-abcdefghijklmnopqrstuvwxyz")
	admin, err := client.New(srv.URL, srv.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := admin.Upload(ctx, ws, []client.UploadFile{client.BytesFile(name, "application/pdf", content)})
	if err != nil {
		t.Fatal(err)
	}
	var payload []byte
	select {
	case payload = <-msgs:
	case <-time.After(5 * time.Second):
		t.Fatal("no hint within 5s of the upload's 200")
	}
	t.Logf("hint: %s", payload)
	var h push.Hint
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		t.Fatalf("hint %s: %v; want only workspace_id and file_ids", payload, err)
	}
	files, err := admin.List(ctx, ws)
	if err != nil || len(files) != 1 {
		t.Fatalf("list: %v, %d files", err, len(files))
	}
	if h.WorkspaceID != ws || len(h.FileIDs) != 1 || h.FileIDs[0] != files[0].FileID {
		t.Errorf("hint %s: want workspace %s and file %s (upload answered %+v)", payload, ws, files[0].FileID, up)
	}
	lower := strings.ToLower(string(payload))
	for _, secret := range []string{name, "quarterly", "secret", "pdf", "confidential", string(content[:16]),
		hex.EncodeToString(content[:12]), base64.StdEncoding.EncodeToString(content[:12]), files[0].SHA256} {
		if secret != "" && strings.Contains(lower, strings.ToLower(secret)) {
			t.Errorf("hint %s carries %q", payload, secret)
		}
	}
}

// TestPushHintOfACommit: a file uploaded through the bucket (presign,
// PUT, commit) is hinted once its commit committed, with its id only;
// a replayed commit stores nothing and hints nothing.
func TestPushHintOfACommit(t *testing.T) { // S3 sets the environment: not parallel
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"MAX_REQUEST_BYTES": "1024", "INLINE_MAX_BYTES": "512"}})
	b, err := localbroker.Start("127.0.0.1:0", srv.Store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	srv.Store.Notifier = &push.Hints{Publisher: b}
	ws := uuid.New()
	c, err := dial(t, b, ws.String(), srv.WorkspaceToken(t, ws), ws.String())
	if err != nil {
		t.Fatal(err)
	}
	_, msgs := subscribe(t, c, push.Topic(ws))
	admin, err := client.New(srv.URL, srv.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	content := bytes.Repeat([]byte("committed-through-the-bucket "), 100) // 2,900 bytes: over the request cap
	f := client.BytesFile("big-secret.bin", "", content)
	var uploadID string
	f.OnPresigned = func(p client.PresignedUpload) error { uploadID = p.UploadID.String(); return nil }
	if _, err := admin.Upload(ctx, ws, []client.UploadFile{f}); err != nil {
		t.Fatal(err)
	}
	files, err := admin.List(ctx, ws)
	if err != nil || len(files) != 1 {
		t.Fatalf("list: %v, %d files", err, len(files))
	}
	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM presigned_uploads WHERE file_id = $1`, files[0].FileID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("no presigned upload became the file (%d, %v): the commit path was not taken", n, err)
	}
	select {
	case payload := <-msgs:
		want := `{"workspace_id":"` + ws.String() + `","file_ids":["` + files[0].FileID.String() + `"]}`
		if string(payload) != want {
			t.Errorf("hint of the commit: got %s, want %s", payload, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no hint within 5s of the commit's 200")
	}
	// The commit again, as a client whose answer was lost: a replay.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/workspaces/"+ws.String()+"/chat/uploads",
		strings.NewReader(`{"files":[{"upload_id":"`+uploadID+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	replay, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(replay), files[0].FileID.String()) {
		t.Fatalf("the commit replayed (upload %s): got %d %s, want 200 with the same file", uploadID, resp.StatusCode, replay)
	}
	select {
	case payload := <-msgs:
		t.Errorf("a second hint for one upload (the replay's): %s", payload)
	case <-time.After(300 * time.Millisecond):
	}
}
