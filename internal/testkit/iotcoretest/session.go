package iotcoretest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	mqttpackets "github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

// sigV4Params mark a SigV4-signed (presigned) WebSocket URL.
var sigV4Params = []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Signature", "X-Amz-Security-Token"}

const authorizerParam = "x-amz-customauthorizer-name"

// upgrade checks the HTTP side of the handshake, upgrades, and runs the
// MQTT session.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case r.URL.Path != "/mqtt":
		s.refuse("path %s: the WebSocket endpoint is /mqtt", r.URL.Path)
		http.NotFound(w, r)
		return
	case !websocket.IsWebSocketUpgrade(r):
		s.refuse("%s /mqtt without a WebSocket upgrade", r.Method)
		http.Error(w, "not a WebSocket upgrade", http.StatusBadRequest)
		return
	case !slices.Contains(websocket.Subprotocols(r), "mqtt"):
		s.refuse("Sec-WebSocket-Protocol %q: want mqtt", websocket.Subprotocols(r))
		http.Error(w, "no mqtt subprotocol", http.StatusBadRequest)
		return
	case r.Header.Get("Authorization") != "" || signedQuery(q):
		s.refuse("a SigV4-signed upgrade: IoT Core authenticates it with IAM, not with the custom authorizer")
		http.Error(w, "signature does not match", http.StatusForbidden)
		return
	}
	up := websocket.Upgrader{Subprotocols: []string{"mqtt"}, CheckOrigin: func(*http.Request) bool { return true },
		HandshakeTimeout: 10 * time.Second}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ss := &session{s: s, ws: ws, r: r, subs: map[string]bool{}}
	s.mu.Lock()
	s.sessions[ss] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
		ws.Close()
	}()
	ss.run()
}

func signedQuery(q url.Values) bool {
	for _, p := range sigV4Params {
		if q.Has(p) {
			return true
		}
	}
	return false
}

// session is one MQTT connection over a WebSocket.
type session struct {
	s  *Server
	ws *websocket.Conn
	r  *http.Request
	rd io.Reader // the current WebSocket message

	wmu      sync.Mutex
	mu       sync.Mutex
	policies []*events.IAMPolicyDocument
	subs     map[string]bool
}

// Read reads MQTT bytes across WebSocket binary messages.
func (ss *session) Read(p []byte) (int, error) {
	for {
		if ss.rd == nil {
			typ, r, err := ss.ws.NextReader()
			if err != nil {
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				ss.s.refuse("a WebSocket text message: MQTT travels in binary messages")
				return 0, io.ErrUnexpectedEOF
			}
			ss.rd = r
		}
		n, err := ss.rd.Read(p)
		if err == io.EOF {
			ss.rd = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

// send writes one MQTT packet as one binary message.
func (ss *session) send(p mqttpackets.ControlPacket) error {
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		return err
	}
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	_ = ss.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return ss.ws.WriteMessage(websocket.BinaryMessage, b.Bytes())
}

// run authenticates the CONNECT, then serves SUBSCRIBE, PINGREQ and
// PUBLISH until the client leaves or breaks a rule.
func (ss *session) run() {
	_ = ss.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	pkt, err := mqttpackets.ReadPacket(ss)
	if err != nil {
		ss.s.refuse("no MQTT CONNECT: %v", err)
		return
	}
	c, ok := pkt.(*mqttpackets.ConnectPacket)
	if !ok {
		ss.s.refuse("first packet %T, want CONNECT", pkt)
		return
	}
	if !ss.connect(c) {
		ack := mqttpackets.NewControlPacket(mqttpackets.Connack).(*mqttpackets.ConnackPacket)
		ack.ReturnCode = mqttpackets.ErrRefusedNotAuthorised
		_ = ss.send(ack)
		return
	}
	_ = ss.send(mqttpackets.NewControlPacket(mqttpackets.Connack))
	for {
		var dl time.Time // MQTT's: one and a half keep-alives without a packet
		if c.Keepalive > 0 {
			dl = time.Now().Add(time.Duration(c.Keepalive) * 3 / 2 * time.Second)
		}
		_ = ss.ws.SetReadDeadline(dl)
		pkt, err := mqttpackets.ReadPacket(ss)
		if err != nil {
			return
		}
		switch p := pkt.(type) {
		case *mqttpackets.SubscribePacket:
			ack := mqttpackets.NewControlPacket(mqttpackets.Suback).(*mqttpackets.SubackPacket)
			ack.MessageID = p.MessageID
			for _, f := range p.Topics {
				if ss.allowed("iot:Subscribe", "topicfilter/"+f) {
					ss.mu.Lock()
					ss.subs[f] = true
					ss.mu.Unlock()
					ack.ReturnCodes = append(ack.ReturnCodes, 0)
				} else {
					ss.s.refuse("iot:Subscribe %s not allowed by the authorizer's policy", f)
					ack.ReturnCodes = append(ack.ReturnCodes, 0x80)
				}
			}
			_ = ss.send(ack)
		case *mqttpackets.PingreqPacket:
			_ = ss.send(mqttpackets.NewControlPacket(mqttpackets.Pingresp))
		case *mqttpackets.PublishPacket:
			if !ss.allowed("iot:Publish", "topic/"+p.TopicName) {
				ss.s.refuse("iot:Publish %s not allowed by the authorizer's policy: disconnected", p.TopicName)
				return
			}
		case *mqttpackets.DisconnectPacket:
			return
		}
	}
}

// principalID is custom-auth-lambda.html's principalId pattern.
var principalID = regexp.MustCompile(`^[a-zA-Z0-9]{1,128}$`)

// connect checks the CONNECT and asks the authorizer, as IoT Core does.
func (ss *session) connect(c *mqttpackets.ConnectPacket) bool {
	s := ss.s
	if c.ProtocolName != "MQTT" || (c.ProtocolVersion != 4 && c.ProtocolVersion != 5) {
		s.refuse("CONNECT %s %d: IoT Core speaks MQTT 3.1.1 and 5", c.ProtocolName, c.ProtocolVersion)
		return false
	}
	names := map[string]bool{}
	if v := ss.r.Header.Get(authorizerParam); v != "" {
		names[v] = true
	}
	if v := ss.r.URL.Query().Get(authorizerParam); v != "" {
		names[v] = true
	}
	if _, q, ok := strings.Cut(c.Username, "?"); ok {
		if v, _ := url.ParseQuery(q); v.Get(authorizerParam) != "" {
			names[v.Get(authorizerParam)] = true
		}
	}
	switch {
	case len(names) == 0:
		s.refuse("no authorizer named (x-amz-customauthorizer-name), and the endpoint has no default authorizer")
		return false
	case len(names) > 1 || !names[s.o.Authorizer]:
		s.refuse("authorizer %v: the account has only %s", keys(names), s.o.Authorizer)
		return false
	}
	resp, err := ss.authorize(c)
	switch {
	case err != nil:
		s.refuse("the authorizer failed: %v", err)
		return false
	case !resp.IsAuthenticated:
		s.refuse("the authorizer did not authenticate %q", c.Username)
		return false
	case !principalID.MatchString(resp.PrincipalID) || len(resp.PolicyDocuments) > 10 ||
		resp.RefreshAfterInSeconds < 300 || resp.RefreshAfterInSeconds > 86400 ||
		resp.DisconnectAfterInSeconds < 300 || resp.DisconnectAfterInSeconds > 86400:
		s.refuse("the authorizer's answer breaks its contract: %+v", resp)
		return false
	}
	ss.policies = resp.PolicyDocuments
	if !ss.allowed("iot:Connect", "client/"+c.ClientIdentifier) {
		s.refuse("iot:Connect as client %s not allowed by the authorizer's policy", c.ClientIdentifier)
		return false
	}
	return true
}

// authorize builds the authorizer's event as IoT Core does (through
// JSON: the password base64-encoded) and calls it within its 5 s.
func (ss *session) authorize(c *mqttpackets.ConnectPacket) (events.IoTCoreCustomAuthorizerResponse, error) {
	headers := map[string]string{}
	for k, v := range ss.r.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ev := events.IoTCoreCustomAuthorizerRequest{
		Protocols: []string{"tls", "http", "mqtt"},
		ProtocolData: &events.IoTCoreProtocolData{
			TLS:  &events.IoTCoreTLSContext{ServerName: ss.r.TLS.ServerName},
			HTTP: &events.IoTCoreHTTPContext{Headers: headers, QueryString: "?" + ss.r.URL.RawQuery},
			MQTT: &events.IoTCoreMQTTContext{ClientID: c.ClientIdentifier, Username: c.Username, Password: c.Password},
		},
		ConnectionMetadata: &events.IoTCoreConnectionMetadata{ID: uuid.NewString()},
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return events.IoTCoreCustomAuthorizerResponse{}, err
	}
	var in events.IoTCoreCustomAuthorizerRequest
	if err := json.Unmarshal(b, &in); err != nil {
		return events.IoTCoreCustomAuthorizerResponse{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: uuid.NewString(), InvokedFunctionArn: ss.s.o.FunctionARN})
	return ss.s.o.Authorize(ctx, in)
}

// allowed judges action on the resource (after the account's IoT ARN
// prefix) by the authorizer's policies: some Allow, and no Deny.
func (ss *session) allowed(action, resource string) bool {
	arn := ss.s.iotARN + ":" + resource
	allow := false
	for _, d := range ss.policies {
		for _, st := range d.Statement {
			if !matchAny(st.Action, action) || !matchAny(st.Resource, arn) {
				continue
			}
			if st.Effect == "Deny" {
				return false
			}
			allow = allow || st.Effect == "Allow"
		}
	}
	return allow
}

// matchAny: one of patterns (IAM's * and ? wildcards) matches v.
func matchAny(patterns []string, v string) bool {
	for _, p := range patterns {
		re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(p)) + "$"
		if ok, _ := regexp.MatchString(re, v); ok {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Publish delivers payload at QoS 0 to every session subscribed to topic
// (exactly: the hints' filters have no wildcard) whose policy allows
// iot:Receive on it, as IoT Core's HTTPS Publish would. It is a
// push.Publisher; it never fails.
func (s *Server) Publish(_ context.Context, topic string, payload []byte) error {
	s.mu.Lock()
	var to []*session
	for ss := range s.sessions {
		ss.mu.Lock()
		if ss.subs[topic] {
			to = append(to, ss)
		}
		ss.mu.Unlock()
	}
	s.mu.Unlock()
	for _, ss := range to {
		if !ss.allowed("iot:Receive", "topic/"+topic) {
			continue
		}
		p := mqttpackets.NewControlPacket(mqttpackets.Publish).(*mqttpackets.PublishPacket)
		p.TopicName, p.Payload = topic, payload
		_ = ss.send(p)
	}
	return nil
}

// splitARN splits an ARN on its colons.
func splitARN(arn string) []string { return strings.Split(arn, ":") }
