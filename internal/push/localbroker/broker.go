// Package localbroker is the MQTT broker of make run and of the push
// tests: mochi-mqtt in the same process, serving MQTT over WebSocket at
// /mqtt on a loopback port, with the check AWS IoT Core's custom
// authorizer makes (push.Allow on connect, push.MaySubscribe on
// subscribe; no client may publish). The service publishes to it in
// process (Broker is a push.Publisher).
package localbroker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/google/uuid"

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

// Start starts a broker listening on addr (host:port; port 0 picks a
// free one), checking credentials with v. log receives the broker's own
// warnings and every refused connection (nil: discarded).
func Start(addr string, v push.Verifier, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("push broker: %w", err)
	}
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: log.With("component", "mqtt")})
	if err := srv.AddHook(&checkHook{verify: v, log: log}, nil); err != nil {
		ln.Close()
		return nil, fmt.Errorf("push broker: %w", err)
	}
	wl := &wsListener{ln: ln}
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
// push.MaySubscribe; it refuses every client publish.
type checkHook struct {
	mqtt.HookBase
	verify push.Verifier
	log    *slog.Logger
}

func (h *checkHook) ID() string { return "pendinguploads-token-check" }

func (h *checkHook) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck
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
	srv       *http.Server
	establish listeners.EstablishFn // set by Serve, before the first accept
}

func (l *wsListener) ID() string       { return "ws" }
func (l *wsListener) Address() string  { return l.ln.Addr().String() }
func (l *wsListener) Protocol() string { return "ws" }

func (l *wsListener) Init(*slog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc(Path, func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		_ = l.establish(l.ID(), newWSConn(c))
	})
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return nil
}

func (l *wsListener) Serve(establish listeners.EstablishFn) {
	l.establish = establish
	_ = l.srv.Serve(l.ln) // http.ErrServerClosed once Close ran
}

func (l *wsListener) Close(closeClients listeners.CloseFn) {
	_ = l.srv.Close() // closes l.ln too
	_ = l.ln.Close()  // in case Serve never ran
	closeClients(l.ID())
}
