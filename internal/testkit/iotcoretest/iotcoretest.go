// Package iotcoretest stands in for AWS IoT Core's data endpoint as a
// client of custom authentication over MQTT over WebSocket meets it
// (pull --watch's connection, client/watch), over real TLS on loopback,
// and refuses what AWS IoT Core's documentation does not allow. The
// rules, each with its page:
//
//   - Port 443, MQTT over WebSocket with custom authentication: no ALPN
//     protocol name selects it ("N/A"). An ALPN of mqtt selects raw MQTT
//     (custom authentication over MQTT, not WebSocket), x-amzn-mqtt-ca and
//     x-amzn-http-ca select X.509 client certificates: a WebSocket upgrade
//     sent there is refused. "Protocols, port mappings, and
//     authentication", https://docs.aws.amazon.com/iot/latest/developerguide/protocols.html
//   - SNI with the data endpoint's host name: "the ALPN and SNI TLS
//     extensions are required" when the credentials travel in the MQTT
//     CONNECT, as ours do (the WebSocket section of
//     https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth.html;
//     its "ALPN" is the MQTT section's mqtt, which protocols.html gives to
//     raw MQTT only: the stand-in accepts no ALPN and http/1.1, which is
//     what AWS's own Device SDK sends for WebSockets on 443).
//   - GET /mqtt with Upgrade: websocket and Sec-WebSocket-Protocol: mqtt
//     (custom-auth.html's WebSocket example).
//   - The authorizer named by x-amz-customauthorizer-name, in a header or
//     the query of the upgrade, or in the CONNECT username's query
//     (custom-auth.html); unknown, or named by nobody (the endpoint has no
//     default authorizer), refused.
//   - Unsigned: a SigV4-signed upgrade (X-Amz-Signature and the rest in
//     the query, or an Authorization header) is IAM authentication
//     ("MQTT over WebSocket | Signature Version 4", protocols.html), which
//     this stand-in has none of: refused rather than sent to the
//     authorizer.
//   - MQTT 3.1.1 (or 5: "MQTT", https://docs.aws.amazon.com/iot/latest/developerguide/mqtt.html);
//     3.1 refused.
//   - The authorizer's Lambda event as IoT Core builds it (the password
//     base64-encoded, the TLS, HTTP and MQTT data), and its answer held to
//     the contract of
//     https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth-lambda.html
//     (principalId [a-zA-Z0-9]{1,128}, refreshAfterInSeconds and
//     disconnectAfterInSeconds 300..86400, at most 10 policy documents);
//     not authenticated, or an error, refused; then each action judged by
//     the returned policies (iot:Connect on client/<client id>,
//     iot:Subscribe on topicfilter/<filter>, iot:Receive on topic/<topic>,
//     iot:Publish on topic/<topic>), an explicit Deny winning.
//
// The client reaches it through ProxyURL, an HTTP CONNECT proxy on
// loopback that carries Endpoint:443 (and nothing else) to it, so the
// client's TLS and its Host header name the endpoint as they would in
// AWS; the certificate is self-signed for Endpoint, trusted through
// RootCAs. Every refusal is recorded with its reason (Refusals).
package iotcoretest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Authorize is the custom authorizer's Lambda handler, as IoT Core
// invokes it (push.Authorizer.Handle): ctx carries the Lambda context
// with the function's ARN.
type Authorize func(context.Context, events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error)

// Options configure a stand-in.
type Options struct {
	// Endpoint is the data endpoint's host name (default
	// a1b2c3d4e5f6g7-ats.iot.us-east-1.amazonaws.com).
	Endpoint string
	// Authorizer is the custom authorizer's name (default pushauth).
	Authorizer string
	// Authorize answers for the authorizer (required).
	Authorize Authorize
	// FunctionARN is the authorizer function's, handed to it in its
	// Lambda context; its region and account make the policies'
	// resources (default arn:aws:lambda:us-east-1:123456789012:function:pushauth).
	FunctionARN string
}

// Server is a running stand-in. Safe for concurrent use.
type Server struct {
	o       Options
	iotARN  string // arn:aws:iot:<region>:<account>
	RootCAs *x509.CertPool
	// CertPEM is the endpoint's certificate, PEM-encoded: a process
	// trusts it with SSL_CERT_FILE set to a file holding it.
	CertPEM  []byte
	ProxyURL *url.URL
	ln       net.Listener
	conns    chan net.Conn // tunnelled connections, to the TLS server
	http     *http.Server

	mu        sync.Mutex
	refusals  []string
	sessions  map[*session]bool
	published []Published
}

// Start starts a stand-in on loopback, closed at the test's end.
func Start(tb testing.TB, o Options) *Server {
	tb.Helper()
	if o.Authorize == nil {
		tb.Fatal("iotcoretest: Options.Authorize is required")
	}
	if o.Endpoint == "" {
		o.Endpoint = "a1b2c3d4e5f6g7-ats.iot.us-east-1.amazonaws.com"
	}
	if o.Authorizer == "" {
		o.Authorizer = "pushauth"
	}
	if o.FunctionARN == "" {
		o.FunctionARN = "arn:aws:lambda:us-east-1:123456789012:function:pushauth"
	}
	p := splitARN(o.FunctionARN)
	if len(p) < 7 {
		tb.Fatalf("iotcoretest: FunctionARN %q is not a Lambda function's", o.FunctionARN)
	}
	cert, pool := selfSigned(tb, o.Endpoint)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{o: o, iotARN: "arn:" + p[1] + ":iot:" + p[3] + ":" + p[4], RootCAs: pool, ln: ln,
		ProxyURL: &url.URL{Scheme: "http", Host: ln.Addr().String()},
		conns:    make(chan net.Conn), sessions: map[*session]bool{},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Leaf.Raw})}
	s.http = &http.Server{
		Handler:           http.HandlerFunc(s.serve),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         s.tlsConfig(cert),
		// The ALPN names that are not WebSocket's: refused (no HTTP/2
		// either, which an empty map also turns off).
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     log.New(io.Discard, "", 0),
	}
	for _, proto := range []string{"mqtt", "x-amzn-mqtt-ca", "x-amzn-http-ca"} {
		s.http.TLSNextProto[proto] = func(_ *http.Server, c *tls.Conn, _ http.Handler) {
			s.refuse("ALPN %s: on port 443 it selects %s, not MQTT over WebSocket with custom authentication", proto, alpnMeaning[proto])
			c.Close()
		}
	}
	go s.proxy()
	go s.http.ServeTLS(&chanListener{c: s.conns, addr: ln.Addr()}, "", "")
	tb.Cleanup(s.Close)
	return s
}

var alpnMeaning = map[string]string{
	"mqtt":           "raw MQTT with custom authentication",
	"x-amzn-mqtt-ca": "MQTT with an X.509 client certificate",
	"x-amzn-http-ca": "HTTPS with an X.509 client certificate",
}

// Endpoint is the data endpoint's host name; URL the wss URL a server
// announces for it (with the authorizer's name in the query).
func (s *Server) Endpoint() string { return s.o.Endpoint }

// URL is wss://<Endpoint>/mqtt?x-amz-customauthorizer-name=<Authorizer>,
// what the template's PushUrl and GET /uploads/limits give.
func (s *Server) URL() string {
	return "wss://" + s.o.Endpoint + "/mqtt?" + url.Values{"x-amz-customauthorizer-name": {s.o.Authorizer}}.Encode()
}

// Proxy is a proxy function for the client's dialer: every request
// through ProxyURL.
func (s *Server) Proxy(*http.Request) (*url.URL, error) { return s.ProxyURL, nil }

// Refusals returns the reason of every connection refused so far.
func (s *Server) Refusals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refusals)
}

func (s *Server) refuse(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusals = append(s.refusals, fmt.Sprintf(format, args...))
}

// Close stops the stand-in and drops every connection.
func (s *Server) Close() {
	s.ln.Close()
	s.http.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss := range s.sessions {
		ss.ws.Close()
	}
}

// tlsConfig is IoT Core's side of the handshake: TLS 1.2 or 1.3, the
// endpoint's certificate, SNI required and equal to the endpoint.
func (s *Server) tlsConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1", "mqtt", "x-amzn-mqtt-ca", "x-amzn-http-ca"},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			switch {
			case h.ServerName == "":
				s.refuse("no SNI: custom authentication needs the data endpoint's host name in the TLS SNI")
				return nil, errors.New("no SNI")
			case h.ServerName != s.o.Endpoint:
				s.refuse("SNI %q is not the data endpoint %s", h.ServerName, s.o.Endpoint)
				return nil, errors.New("unknown SNI")
			}
			return nil, nil
		},
	}
}

// proxy accepts CONNECT requests for Endpoint:443 and hands each tunnel
// to the TLS server; anything else is answered 403 and recorded.
func (s *Server) proxy() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				c.Close()
				return
			}
			host, port, _ := net.SplitHostPort(req.Host)
			if req.Method != http.MethodConnect || host != s.o.Endpoint || port != "443" {
				s.refuse("%s %s: custom authentication over WebSocket is on %s:443", req.Method, req.Host, s.o.Endpoint)
				io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
				c.Close()
				return
			}
			io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
			_ = c.SetDeadline(time.Time{})
			select {
			case s.conns <- c:
			case <-time.After(10 * time.Second):
				c.Close()
			}
		}()
	}
}

// chanListener is a net.Listener over the proxy's tunnels.
type chanListener struct {
	c    chan net.Conn
	addr net.Addr
	once sync.Once
	done chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	l.once.Do(func() { l.done = make(chan struct{}) })
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { l.done = make(chan struct{}) })
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// selfSigned makes a certificate for host and a pool that trusts it.
func selfSigned(tb testing.TB, host string) (tls.Certificate, *x509.CertPool) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
