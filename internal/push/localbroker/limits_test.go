package localbroker_test

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/push/localbroker"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// serveLimited starts the service and a broker under limits.
func serveLimited(t *testing.T, limits localbroker.Limits) (*apptest.Server, *localbroker.Broker) {
	t.Helper()
	srv := apptest.NewServer(t, apptest.Options{})
	b, err := localbroker.StartLimited("127.0.0.1:0", srv.Store, slog.New(slog.DiscardHandler), limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return srv, b
}

// rawWS opens a WebSocket to the broker that speaks no MQTT unless the
// test writes it; its answer is the upgrade's status (101, or the refusal).
func rawWS(t *testing.T, b *localbroker.Broker) (*websocket.Conn, int, error) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second}
	c, res, err := d.Dial(b.URL(), nil)
	status := 0
	if res != nil {
		status = res.StatusCode
		res.Body.Close()
	}
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, status, err
}

// closedByBroker reads c until the broker closes it, at most 10 s; it
// reports whether it did (a read timeout: it did not).
func closedByBroker(t *testing.T, c *websocket.Conn) bool {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// TestPushWillIsNeverPublished: a client of workspace X connects with a
// will, retained, on workspace Y's topic (and another with a will on its
// own topic), then its connection is cut without a DISCONNECT. Y's
// subscriber hears nothing, nor does a subscriber that comes later (no
// retained message), nor X's own: a client may not publish, not even by
// its will. Before, the will reached Y's subscribers and was retained.
func TestPushWillIsNeverPublished(t *testing.T) {
	t.Parallel()
	srv, b := serve(t)
	x, y := uuid.New(), uuid.New()
	tokX, tokY := srv.WorkspaceToken(t, x), srv.WorkspaceToken(t, y)
	cy, err := dial(t, b, y.String(), tokY, y.String()+"-sub")
	if err != nil {
		t.Fatal(err)
	}
	_, heardY := subscribe(t, cy, push.Topic(y))
	cx, err := dial(t, b, x.String(), tokX, x.String()+"-sub")
	if err != nil {
		t.Fatal(err)
	}
	_, heardX := subscribe(t, cx, push.Topic(x))

	forged := `{"workspace_id":"` + y.String() + `","file_ids":[],"name":"invoice.pdf.exe"}`
	for _, will := range []struct {
		id, topic string
		retain    bool
	}{{x.String() + "-w1", push.Topic(y), true}, {x.String() + "-w2", push.Topic(x), false}} {
		var conn net.Conn
		opts := mqtt.NewClientOptions().AddBroker(b.URL()).SetClientID(will.id).SetUsername(x.String()).SetPassword(tokX).
			SetAutoReconnect(false).SetConnectTimeout(5*time.Second).SetWill(will.topic, forged, 1, will.retain).
			SetCustomOpenConnectionFn(func(u *url.URL, _ mqtt.ClientOptions) (net.Conn, error) {
				c, err := mqtt.NewWebsocket(u.String(), nil, 5*time.Second, nil, nil)
				conn = c
				return c, err
			})
		c := mqtt.NewClient(opts)
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("connect with a will on %s: %v", will.topic, tok.Error())
		}
		held := b.Connected()
		_ = conn.Close() // cut: no DISCONNECT, so the will is due
		for i := 0; b.Connected() >= held; i++ {
			if i == 1000 {
				t.Fatal("the broker still holds the cut connection after 10 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	later, err := dial(t, b, y.String(), tokY, y.String()+"-later")
	if err != nil {
		t.Fatal(err)
	}
	_, heardLater := subscribe(t, later, push.Topic(y))
	time.Sleep(300 * time.Millisecond) // a delivery is on its way by then
	for who, heard := range map[string]<-chan []byte{
		"Y's subscriber": heardY, "X's own subscriber": heardX, "a later subscriber of Y (retained)": heardLater} {
		select {
		case m := <-heard:
			t.Errorf("%s got X's will: %s", who, m)
		default:
		}
	}
}

// TestPushOversizedConnectRefused: an unauthenticated WebSocket whose
// CONNECT declares 200 MiB is closed from the fixed header (IoT Core's
// 128 KiB cap), and the broker holds no room for it. Before, the broker
// allocated the declared length and waited for it, the connection open.
func TestPushOversizedConnectRefused(t *testing.T) { // measures the heap: not parallel
	_, b := serve(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// CONNECT, remaining length 209,715,200 (200 MiB) as MQTT's varint.
	header := []byte{0x10, 0x80, 0x80, 0x80, 0x64}
	var conns []*websocket.Conn
	for range 2 {
		c, _, err := rawWS(t, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WriteMessage(websocket.BinaryMessage, header); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		if !closedByBroker(t, c) {
			t.Errorf("connection %d declaring a 200 MiB CONNECT: still open after 10 s, want closed", i)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64<<20 {
		t.Errorf("heap grew by %d MiB for two declared 200 MiB CONNECTs, want no room made for them", grew>>20)
	}
}

// TestPushConnectWithin: a WebSocket that never sends CONNECT is closed
// once Limits.ConnectWithin has passed. Before, it was held forever.
func TestPushConnectWithin(t *testing.T) {
	t.Parallel()
	_, b := serveLimited(t, localbroker.Limits{ConnectWithin: 200 * time.Millisecond})
	c, _, err := rawWS(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if !closedByBroker(t, c) {
		t.Fatal("a WebSocket without CONNECT: still open 10 s after the upgrade, want closed after 200 ms")
	}
}

// TestPushConnectionBound: with Limits.MaxConnections 2, a silent
// WebSocket and an admitted client hold both; a third upgrade is answered
// 503, and once a connection is gone a new one is taken again. Before,
// every upgrade was taken.
func TestPushConnectionBound(t *testing.T) {
	t.Parallel()
	srv, b := serveLimited(t, localbroker.Limits{ConnectWithin: time.Minute, MaxConnections: 2})
	silent, _, err := rawWS(t, b)
	if err != nil {
		t.Fatal(err)
	}
	ws := uuid.New()
	if _, err := dial(t, b, ws.String(), srv.WorkspaceToken(t, ws), ws.String()); err != nil {
		t.Fatalf("a client within the bound: %v", err)
	}
	if _, status, err := rawWS(t, b); err == nil || status != http.StatusServiceUnavailable {
		t.Fatalf("a third connection: got status %d, %v; want refused, 503", status, err)
	}
	_ = silent.Close()
	for i := 0; ; i++ {
		_, status, err := rawWS(t, b)
		if err == nil {
			break
		}
		if status != http.StatusServiceUnavailable || i == 100 {
			t.Fatalf("a connection after one closed: got status %d, %v; want taken within 10 s", status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
