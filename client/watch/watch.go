// Package watch pulls a workspace's files as soon as the server hints
// that one arrived, and falls back to a slow poll: pendingctl pull
// --watch. It holds one MQTT-over-WebSocket subscription (AWS IoT Core in
// production, make run's broker locally) to the topic the server
// announces (client.PushSubscription), with the workspace's id and token
// as the API takes them, and runs a pull on each hint. A hint is only a
// hint: the list is the truth, so a hint lost (a broker restart, a
// dropped connection) delays a file by at most the fallback interval, and
// every reconnection pulls once for the hints it may have missed.
package watch

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/pendinguploads/pendinguploads/client"
)

// Defaults of a Watcher's settings.
const (
	DefaultFallback   = 5 * time.Minute
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = time.Minute
	// connectTimeout bounds one connection attempt (the WebSocket
	// handshake, CONNECT, SUBSCRIBE), and how long Run waits for the
	// first one before its first pull.
	connectTimeout = 10 * time.Second
)

// Watcher runs Pull when a hint arrives on Sub's topic, and when none
// came for Fallback. Set the fields, then call Run once.
type Watcher struct {
	Sub client.PushSubscription
	// Pull runs one pull round. A non-nil error stops Run with it (a
	// refused token, a folder another pull holds); a round that failed
	// but may succeed later should report itself and return nil.
	Pull func(ctx context.Context) error
	// Fallback is the longest time between two pulls without a hint
	// (default DefaultFallback).
	Fallback time.Duration
	// MinBackoff and MaxBackoff bound the wait before a reconnection,
	// doubled after each failed attempt (defaults 1 s and 1 min); each
	// wait is jittered between half of it and all of it.
	MinBackoff, MaxBackoff time.Duration
	// Status receives one line each time the watcher's state changes:
	// connected, polling, reconnecting in N s (nil: none).
	Status func(line string)
	// RootCAs verifies a wss broker's certificate (nil: the system's
	// roots).
	RootCAs *x509.CertPool
	// Proxy chooses the HTTP proxy of the WebSocket connection (nil:
	// http.ProxyFromEnvironment, HTTPS_PROXY and NO_PROXY).
	Proxy func(*http.Request) (*url.URL, error)
}

func (w *Watcher) status(format string, args ...any) {
	if w.Status != nil {
		w.Status(fmt.Sprintf(format, args...))
	}
}

// Run pulls once (after the first connection attempt, so no hint falls
// between the two), then on every hint, every reconnection and after
// Fallback without one, until ctx ends (nil) or Pull returns an error.
func (w *Watcher) Run(ctx context.Context) error {
	fallback := w.Fallback
	if fallback <= 0 {
		fallback = DefaultFallback
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hints := make(chan struct{}, 1)
	first := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.subscribe(ctx, hints, first)
	}()
	defer func() { cancel(); <-done }()

	select {
	case <-first:
	case <-time.After(connectTimeout):
	case <-ctx.Done():
		return nil
	}
	timer := time.NewTimer(fallback)
	defer timer.Stop()
	for {
		if err := w.Pull(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		timer.Reset(fallback)
		select {
		case <-ctx.Done():
			return nil
		case <-hints:
		case <-timer.C:
			w.status("polling (no hint for %s)", fallback)
		}
	}
}

// subscribe holds the subscription, reconnecting with bounded backoff;
// each hint, and each reconnection after the first, signals hints.
// first is closed once the first attempt has ended, either way.
func (w *Watcher) subscribe(ctx context.Context, hints chan<- struct{}, first chan<- struct{}) {
	minB, maxB := w.MinBackoff, w.MaxBackoff
	if minB <= 0 {
		minB = DefaultMinBackoff
	}
	if maxB < minB {
		maxB = max(DefaultMaxBackoff, minB)
	}
	signal := func() {
		select {
		case hints <- struct{}{}:
		default: // a pull is already due
		}
	}
	backoff := minB
	for attempt := 0; ctx.Err() == nil; attempt++ {
		lost := make(chan error, 1)
		c, err := w.connect(ctx, signal, lost)
		if attempt == 0 {
			close(first)
		}
		if err == nil {
			w.status("connected to %s, waiting for hints on %s", w.Sub.URL, w.Sub.Topic)
			backoff = minB
			if attempt > 0 {
				signal() // hints published while we were away are lost
			}
			select {
			case <-ctx.Done():
				c.Disconnect(250)
				return
			case err = <-lost:
			}
		}
		// Jittered (half to all of backoff): watchers a broker dropped
		// at once do not come back at once.
		wait := backoff/2 + rand.N(backoff/2+1)
		w.status("push: %v; reconnecting in %s", err, wait.Round(100*time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxB)
	}
}

// errRefused: the broker refused the subscription (not this
// workspace's topic, or a token no longer allowed).
var errRefused = errors.New("subscription refused")

// connect connects and subscribes; on success the client is returned
// connected, lost receiving the error that ends the connection.
//
// Against AWS IoT Core the connection is MQTT over WebSocket with custom
// authentication, the credentials in the CONNECT, exactly as
// https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth.html
// ("MQTT over WebSockets") and the port table of
// https://docs.aws.amazon.com/iot/latest/developerguide/protocols.html
// ("Protocols, port mappings, and authentication") have it:
//   - wss to port 443, GET /mqtt, Sec-WebSocket-Protocol mqtt (the
//     announced URL; paho's dialer sets the subprotocol);
//   - the authorizer named by x-amz-customauthorizer-name, in the URL's
//     query (as the server announces it) and as a header of the upgrade;
//   - unsigned: no SigV4 query or Authorization header (the authorizer
//     has signing disabled, and a signed upgrade would be IAM
//     authentication instead);
//   - TLS 1.2 or later with SNI the endpoint's host name, which
//     custom-auth.html requires when the credentials travel in the
//     CONNECT;
//   - ALPN http/1.1 and never mqtt: protocols.html gives MQTT over
//     WebSocket with custom authentication no ALPN name ("N/A") and mqtt
//     to raw MQTT, which a WebSocket upgrade is not; custom-auth.html's
//     "ALPN ... required" points at the raw-MQTT section. AWS's Device SDK
//     likewise sends mqtt only for direct connections, and browsers (which
//     cannot choose ALPN) send http/1.1;
//   - MQTT 3.1.1 (IoT Core speaks 3.1.1 and 5, not 3.1: paho would fall
//     back to 3.1 after a refusal), the workspace's id as the username,
//     the token as the password, a client id the authorizer's policy
//     names.
//
// internal/testkit/iotcoretest enforces these; TestWatchThroughIoTCore
// runs this code against it.
func (w *Watcher) connect(ctx context.Context, onHint func(), lost chan<- error) (mqtt.Client, error) {
	var suffix [8]byte
	_, _ = crand.Read(suffix[:])
	broker, err := url.Parse(w.Sub.URL)
	if err != nil {
		return nil, fmt.Errorf("push URL %q: %w", w.Sub.URL, err)
	}
	opts := mqtt.NewClientOptions().
		AddBroker(w.Sub.URL).
		SetProtocolVersion(4).
		SetTLSConfig(&tls.Config{
			ServerName: broker.Hostname(),
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"},
			RootCAs:    w.RootCAs,
		}).
		SetWebsocketOptions(&mqtt.WebsocketOptions{Proxy: w.Proxy}).
		SetClientID(w.Sub.Username + "-" + hex.EncodeToString(suffix[:])).
		SetUsername(w.Sub.Username).
		SetPassword(w.Sub.Password).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(connectTimeout).
		SetWriteTimeout(connectTimeout).
		SetKeepAlive(30 * time.Second).
		SetPingTimeout(10 * time.Second).
		SetOrderMatters(false).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			select {
			case lost <- err:
			default:
			}
		})
	if w.Sub.Authorizer != "" {
		opts.SetHTTPHeaders(http.Header{"x-amz-customauthorizer-name": {w.Sub.Authorizer}})
	}
	c := mqtt.NewClient(opts)
	if err := wait(ctx, c.Connect()); err != nil {
		return nil, fmt.Errorf("connect %s: %w", w.Sub.URL, err)
	}
	tok := c.Subscribe(w.Sub.Topic, 0, func(mqtt.Client, mqtt.Message) { onHint() })
	err = wait(ctx, tok)
	if st, ok := tok.(*mqtt.SubscribeToken); err == nil && ok && st.Result()[w.Sub.Topic] >= 0x80 {
		err = errRefused
	}
	if err != nil {
		c.Disconnect(0)
		return nil, fmt.Errorf("subscribe %s: %w", w.Sub.Topic, err)
	}
	return c, nil
}

// wait waits for tok at most connectTimeout, or until ctx ends.
func wait(ctx context.Context, tok mqtt.Token) error {
	t := time.NewTimer(connectTimeout)
	defer t.Stop()
	select {
	case <-tok.Done():
		return tok.Error()
	case <-t.C:
		return errors.New("timed out")
	case <-ctx.Done():
		return ctx.Err()
	}
}
