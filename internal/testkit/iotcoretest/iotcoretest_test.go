package iotcoretest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	mqttpackets "github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/gorilla/websocket"

	"github.com/pendinguploads/pendinguploads/internal/testkit/iotcoretest"
)

// authorize stands in for the authorizer function: user ws1 with
// password token1 may connect as ws1 or ws1-…, subscribe to and receive
// topic t.
func authorize(_ context.Context, r events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
	m := r.ProtocolData.MQTT
	name, _, _ := strings.Cut(m.Username, "?")
	if name != "ws1" || string(m.Password) != "token1" {
		return events.IoTCoreCustomAuthorizerResponse{IsAuthenticated: false, PrincipalID: "refused"}, nil
	}
	const arn = "arn:aws:iot:us-east-1:123456789012:"
	return events.IoTCoreCustomAuthorizerResponse{IsAuthenticated: true, PrincipalID: "ws1",
		DisconnectAfterInSeconds: 86400, RefreshAfterInSeconds: 600,
		PolicyDocuments: []*events.IAMPolicyDocument{{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
			{Effect: "Allow", Action: []string{"iot:Connect"}, Resource: []string{arn + "client/ws1", arn + "client/ws1-*"}},
			{Effect: "Allow", Action: []string{"iot:Subscribe"}, Resource: []string{arn + "topicfilter/t"}},
			{Effect: "Allow", Action: []string{"iot:Receive"}, Resource: []string{arn + "topic/t"}},
		}}}}, nil
}

// handshake is one client's way in: the documented one, or that with
// one rule broken.
type handshake struct {
	port, path   string
	query        url.Values
	header       http.Header
	serverName   string // "-": no SNI (an IP literal); else the SNI sent
	alpn         []string
	subprotocols []string
	protocol     string
	version      byte
	username     string
	password     string
}

// documented is the handshake of custom-auth.html for credentials in the
// CONNECT.
func documented(s *iotcoretest.Server) handshake {
	return handshake{port: "443", path: "/mqtt", query: url.Values{"x-amz-customauthorizer-name": {"pushauth"}},
		header: http.Header{"x-amz-customauthorizer-name": {"pushauth"}}, serverName: s.Endpoint(),
		alpn: []string{"http/1.1"}, subprotocols: []string{"mqtt"}, protocol: "MQTT", version: 4,
		username: "ws1", password: "token1"}
}

// try makes the connection h describes and returns nil when the stand-in
// answers CONNACK accepted, with the WebSocket still open.
func try(t *testing.T, s *iotcoretest.Server, h handshake) (*websocket.Conn, error) {
	t.Helper()
	tc := &tls.Config{ServerName: h.serverName, RootCAs: s.RootCAs, NextProtos: h.alpn}
	switch {
	case h.serverName == "-":
		tc.ServerName, tc.InsecureSkipVerify = "127.0.0.1", true // an IP literal is never sent as SNI
	case h.serverName != s.Endpoint():
		tc.InsecureSkipVerify = true // reach the stand-in's check, past the certificate's
	}
	d := websocket.Dialer{Proxy: s.Proxy, TLSClientConfig: tc, Subprotocols: h.subprotocols, HandshakeTimeout: 5 * time.Second}
	u := url.URL{Scheme: "wss", Host: s.Endpoint() + ":" + h.port, Path: h.path, RawQuery: h.query.Encode()}
	ws, resp, err := d.Dial(u.String(), h.header)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("upgrade: %s", resp.Status)
		}
		return nil, fmt.Errorf("dial: %w", err)
	}
	t.Cleanup(func() { ws.Close() })
	c := mqttpackets.NewControlPacket(mqttpackets.Connect).(*mqttpackets.ConnectPacket)
	c.ProtocolName, c.ProtocolVersion, c.Keepalive, c.CleanSession = h.protocol, h.version, 30, true
	c.ClientIdentifier = "ws1-laptop"
	c.UsernameFlag, c.Username = true, h.username
	c.PasswordFlag, c.Password = h.password != "", []byte(h.password)
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, b.Bytes()); err != nil {
		return nil, fmt.Errorf("CONNECT: %w", err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, msg, err := ws.ReadMessage()
	if err != nil {
		return nil, fmt.Errorf("CONNACK: %w", err)
	}
	p, err := mqttpackets.ReadPacket(bytes.NewReader(msg))
	if ack, ok := p.(*mqttpackets.ConnackPacket); err != nil || !ok || ack.ReturnCode != 0 {
		return nil, fmt.Errorf("CONNACK: %v %v", p, err)
	}
	return ws, nil
}

// TestStandIn: the documented handshake is accepted (and the name may
// travel in the CONNECT username instead), subscribes and receives; each
// deviation from custom-auth.html and protocols.html is refused, with the
// rule it broke.
func TestStandIn(t *testing.T) {
	s := iotcoretest.Start(t, iotcoretest.Options{Authorizer: "pushauth", Authorize: authorize})
	t.Run("Documented", func(t *testing.T) {
		ws, err := try(t, s, documented(s))
		if err != nil {
			t.Fatalf("the documented handshake: %v; refusals %q", err, s.Refusals())
		}
		sub := mqttpackets.NewControlPacket(mqttpackets.Subscribe).(*mqttpackets.SubscribePacket)
		sub.MessageID, sub.Topics, sub.Qoss = 1, []string{"t"}, []byte{0}
		var b bytes.Buffer
		_ = sub.Write(&b)
		if err := ws.WriteMessage(websocket.BinaryMessage, b.Bytes()); err != nil {
			t.Fatal(err)
		}
		if _, msg, err := ws.ReadMessage(); err != nil || !bytes.Equal(msg, []byte{0x90, 3, 0, 1, 0}) {
			t.Fatalf("SUBACK: got % x (%v), want granted QoS 0", msg, err)
		}
		_ = s.Publish(context.Background(), "t", []byte("hint"))
		if _, msg, err := ws.ReadMessage(); err != nil || !bytes.HasSuffix(msg, []byte("hint")) {
			t.Fatalf("PUBLISH: got % x (%v), want the hint", msg, err)
		}
	})
	t.Run("NameInUsername", func(t *testing.T) {
		h := documented(s)
		h.query, h.header, h.username = url.Values{}, http.Header{}, "ws1?x-amz-customauthorizer-name=pushauth"
		if _, err := try(t, s, h); err != nil {
			t.Fatalf("the authorizer named in the username (custom-auth.html's MQTT form): %v; refusals %q", err, s.Refusals())
		}
	})
	if r := s.Refusals(); len(r) > 0 {
		t.Fatalf("refused a documented handshake: %q", r)
	}
	deviations := []struct {
		name, want string // want: in the refusal
		change     func(*handshake)
	}{
		{"WrongPath", "path /ws", func(h *handshake) { h.path = "/ws" }},
		{"Port8883", ":8883", func(h *handshake) { h.port = "8883" }},
		{"NoAuthorizerName", "no authorizer named", func(h *handshake) { h.query, h.header = url.Values{}, http.Header{} }},
		{"UnknownAuthorizer", "the account has only pushauth", func(h *handshake) {
			h.query.Set("x-amz-customauthorizer-name", "other")
			h.header = http.Header{}
		}},
		{"SignedUpgrade", "SigV4-signed", func(h *handshake) {
			h.query.Set("X-Amz-Algorithm", "AWS4-HMAC-SHA256")
			h.query.Set("X-Amz-Signature", "abc")
		}},
		{"AuthorizationHeader", "SigV4-signed", func(h *handshake) { h.header.Set("Authorization", "AWS4-HMAC-SHA256 x") }},
		{"NoToken", "did not authenticate", func(h *handshake) { h.password = "" }},
		{"WrongToken", "did not authenticate", func(h *handshake) { h.password = "token2" }},
		{"NoSNI", "no SNI", func(h *handshake) { h.serverName = "-" }},
		{"WrongSNI", `SNI "iot.example.com"`, func(h *handshake) { h.serverName = "iot.example.com" }},
		{"ALPNmqtt", "ALPN mqtt", func(h *handshake) { h.alpn = []string{"mqtt"} }},
		{"ALPNClientCertificate", "ALPN x-amzn-mqtt-ca", func(h *handshake) { h.alpn = []string{"x-amzn-mqtt-ca"} }},
		{"NoSubprotocol", "Sec-WebSocket-Protocol", func(h *handshake) { h.subprotocols = nil }},
		{"MQTT31", "MQIsdp 3", func(h *handshake) { h.protocol, h.version = "MQIsdp", 3 }},
	}
	for _, d := range deviations {
		t.Run(d.name, func(t *testing.T) {
			before := len(s.Refusals())
			h := documented(s)
			h.query, h.header = url.Values{"x-amz-customauthorizer-name": {"pushauth"}}, http.Header{"x-amz-customauthorizer-name": {"pushauth"}}
			d.change(&h)
			_, err := try(t, s, h)
			if err == nil {
				t.Fatalf("accepted; want refused (%s)", d.want)
			}
			var got []string
			deadline := time.Now().Add(5 * time.Second)
			for got = s.Refusals()[before:]; len(got) == 0 && time.Now().Before(deadline); got = s.Refusals()[before:] {
				time.Sleep(10 * time.Millisecond)
			}
			if len(got) != 1 || !strings.Contains(got[0], d.want) {
				t.Errorf("refusals %q (client saw %v), want one naming %q", got, err, d.want)
			}
		})
	}
}
