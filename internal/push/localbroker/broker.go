// Package localbroker is the MQTT broker of make run and of the push
// tests: mochi-mqtt in the same process, serving MQTT over WebSocket at
// /mqtt on a loopback port, with the check AWS IoT Core's custom
// authorizer makes (push.Allow on connect, push.MaySubscribe on
// subscribe; no client may publish, and a client's will is dropped at
// connect, never published nor retained) and IoT Core's bounds (packets
// of at most 128 KiB, CONNECT within seconds of the upgrade, a bound on
// connections). The service publishes to it in process (Broker is a
// push.Publisher).
package localbroker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/pendinguploads/pendinguploads/internal/push"
)

// Path is where the broker takes WebSocket connections.
const Path = "/mqtt"

// Broker is a running broker. Safe for concurrent use.
type Broker struct {
	srv *mqtt.Server
	ws  *wsListener
}

var _ push.Publisher = (*Broker)(nil)

// MaxPacketBytes is the largest MQTT packet the broker reads, fixed
// header included: AWS IoT Core's message size quota, 128 KB
// (https://docs.aws.amazon.com/general/latest/gr/iot-core.html#message-broker-limits).
// A packet declaring more is refused from its fixed header, before its
// body is read or any room made for it, and its connection closed.
const MaxPacketBytes = 128 * 1024

// Limits bound the connections a broker holds. A zero field takes its
// default.
type Limits struct {
	// ConnectWithin bounds the time from the WebSocket's upgrade to its
	// CONNECT packet, read whole; a connection that sends none by then is
	// closed. Default 5 s.
	ConnectWithin time.Duration
	// MaxConnections bounds the WebSocket connections held at once,
	// before CONNECT and after; an upgrade beyond it is answered 503.
	// Default 1000.
	MaxConnections int
}

func (l Limits) withDefaults() Limits {
	if l.ConnectWithin <= 0 {
		l.ConnectWithin = 5 * time.Second
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = 1000
	}
	return l
}

// Start starts a broker listening on addr (host:port; port 0 picks a
// free one), checking credentials with v, under the default Limits. log
// receives the broker's own warnings and every refused connection (nil:
// discarded).
func Start(addr string, v push.Verifier, log *slog.Logger) (*Broker, error) {
	return StartLimited(addr, v, log, Limits{})
}

// StartLimited is Start under limits.
func StartLimited(addr string, v push.Verifier, log *slog.Logger, limits Limits) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limits = limits.withDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("push broker: %w", err)
	}
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = MaxPacketBytes
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: log.With("component", "mqtt"), Capabilities: caps})
	if err := srv.AddHook(&checkHook{verify: v, log: log}, nil); err != nil {
		ln.Close()
		return nil, fmt.Errorf("push broker: %w", err)
	}
	wl := &wsListener{ln: ln, limits: limits, slots: make(chan struct{}, limits.MaxConnections)}
	if err := srv.AddListener(wl); err != nil {
		ln.Close()
		return nil, fmt.Errorf("push broker: %w", err)
	}
	if err := srv.Serve(); err != nil {
		ln.Close()
		return nil, fmt.Errorf("push broker: %w", err)
	}
	return &Broker{srv: srv, ws: wl}, nil
}

// Addr is the address the broker listens on.
func (b *Broker) Addr() string { return b.ws.ln.Addr().String() }

// URL is the broker's MQTT-over-WebSocket URL, ws://host:port/mqtt.
func (b *Broker) URL() string { return "ws://" + b.Addr() + Path }

// Publish sends payload to topic's subscribers (QoS 0), in process.
func (b *Broker) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.srv.Publish(topic, payload, false, 0)
}

// Close stops the broker and drops its connections.
func (b *Broker) Close() error { return b.srv.Close() }

// checkHook admits connections by push.Allow and subscriptions by
// push.MaySubscribe; it refuses every client publish and drops every
// client's will (IoT Core's authorizer policy grants no iot:Publish).
type checkHook struct {
	mqtt.HookBase
	verify push.Verifier
	log    *slog.Logger
}

func (h *checkHook) ID() string { return "pendinguploads-token-check" }

func (h *checkHook) Provides(b byte) bool {
	return b == mqtt.OnConnect || b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck
}

// OnConnect drops the will the CONNECT carries, before the connection is
// admitted: the broker publishes a will without an ACL check, so a will
// would let a client publish (and retain) on any topic, another
// workspace's included, by cutting its connection.
func (h *checkHook) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	if cl.Properties.Will.Flag != 0 {
		h.log.Info("push connection's will dropped: clients may not publish", "client_id", cl.ID)
	}
	cl.Properties.Will = mqtt.Will{}
	return nil
}

// connectTimeout bounds the token look-up of one CONNECT.
const connectTimeout = 5 * time.Second

func (h *checkHook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	_, err := push.Allow(ctx, h.verify, push.Credentials{
		Username: string(pk.Connect.Username), Password: pk.Connect.Password, ClientID: cl.ID})
	if err != nil {
		h.log.Info("push connection refused", "client_id", cl.ID, "reason", err.Error())
		return false
	}
	return true
}

func (h *checkHook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	if write {
		return false // only the service publishes, in process
	}
	name, _, _ := strings.Cut(string(cl.Properties.Username), "?")
	ws, err := uuid.Parse(name) // admitted by OnConnectAuthenticate
	ok := err == nil && push.MaySubscribe(ws, topic)
	if !ok {
		h.log.Info("push subscription refused", "client_id", cl.ID, "topic", topic)
	}
	return ok
}

// wsListener is mochi's listener for our own net.Listener (so port 0
// tells its port), serving MQTT over WebSocket at Path.
type wsListener struct {
	ln        net.Listener
	limits    Limits
	slots     chan struct{} // one per connection held: MaxConnections
	srv       *http.Server
	establish listeners.EstablishFn // set by Serve, before the first accept

	mu       sync.Mutex
	closing  bool
	conns    map[*websocket.Conn]struct{} // upgraded, until their handler returns
	handlers sync.WaitGroup               // the handlers of conns
}

func (l *wsListener) ID() string       { return "ws" }
func (l *wsListener) Address() string  { return l.ln.Addr().String() }
func (l *wsListener) Protocol() string { return "ws" }

func (l *wsListener) Init(*slog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc(Path, func(w http.ResponseWriter, r *http.Request) {
		select {
		case l.slots <- struct{}{}:
			defer func() { <-l.slots }()
		default:
			http.Error(w, "too many connections", http.StatusServiceUnavailable)
			return
		}
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		if !l.hold(c) {
			return
		}
		defer l.release(c)
		// The CONNECT must arrive by then; mochi sets the connection's
		// deadline from its keep-alive once it has read it.
		if err := c.UnderlyingConn().SetReadDeadline(time.Now().Add(l.limits.ConnectWithin)); err != nil {
			return
		}
		_ = l.establish(l.ID(), newWSConn(c))
	})
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return nil
}

func (l *wsListener) Serve(establish listeners.EstablishFn) {
	l.establish = establish
	_ = l.srv.Serve(l.ln) // http.ErrServerClosed once Close ran
}

// hold registers c's handler, or reports false once Close began.
func (l *wsListener) hold(c *websocket.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return false
	}
	if l.conns == nil {
		l.conns = map[*websocket.Conn]struct{}{}
	}
	l.conns[c] = struct{}{}
	l.handlers.Add(1)
	return true
}

func (l *wsListener) release(c *websocket.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	l.handlers.Done()
}

// Close stops taking connections, closes every connection (each client's
// read fails, and mochi disconnects and deletes it), waits for every
// handler, and only then has mochi close what is left of the listener's
// clients: mochi waits for its clients right after, which must not race
// with a handler that is only now handing it a connection. The order
// matters: mochi v2.7.9's Clients.GetByListener (closeClients) takes the
// clients' read lock twice (it calls Len under it), so a client's Delete
// waiting for the write lock in between deadlocks both; once every
// handler has returned, no Delete is left to wait (a 25-minute hang of
// TestLimits seen once in make test).
func (l *wsListener) Close(closeClients listeners.CloseFn) {
	_ = l.srv.Close() // closes l.ln too
	_ = l.ln.Close()  // in case Serve never ran
	l.mu.Lock()
	l.closing = true
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.handlers.Wait()
	closeClients(l.ID())
}
