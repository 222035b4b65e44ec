package iotcoretest

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
)

// maxPublishBytes is IoT Core's message size quota, 128 KiB ("AWS IoT
// Core endpoints and quotas", https://docs.aws.amazon.com/general/latest/gr/iot-core.html).
const maxPublishBytes = 128 * 1024

// credentialScope is a SigV4 Authorization header's credential scope:
// <key id>/<date>/<region>/<service>/aws4_request.
var credentialScope = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=[A-Za-z0-9]+/[0-9]{8}/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$`)

// serve sends HTTPS Publish (POST /topics/…) to publish, anything else
// to the WebSocket upgrade.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/topics/") {
		s.httpsPublish(w, r)
		return
	}
	s.upgrade(w, r)
}

// Published is a message received through HTTPS Publish.
type Published struct {
	Topic   string
	Payload []byte
}

// maxPublished bounds what PublishedMessages keeps (the first ones).
const maxPublished = 10000

// PublishedMessages returns what HTTPS Publish received, in order (the
// first maxPublished).
func (s *Server) PublishedMessages() []Published {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Published(nil), s.published...)
}

// httpsPublish is IoT Core's HTTPS Publish as the iot-data API
// describes it (POST /topics/{topic}?qos=…, the payload as the body;
// https://docs.aws.amazon.com/iot/latest/apireference/API_iotdata_Publish.html),
// on port 443 with SigV4 ("Protocols, port mappings, and authentication":
// HTTPS, Signature Version 4, 443): the Authorization header must name
// the service iotdevicegateway in the endpoint's region, with the
// X-Amz-Date it signed. The signature itself is not checked (the stand-in
// knows no secret key; the role's rights are the template tests'). Only
// QoS 0 (or none) and at most 128 KiB; then the message goes to the
// subscribers as Publish sends it.
func (s *Server) httpsPublish(w http.ResponseWriter, r *http.Request) {
	topic := strings.TrimPrefix(r.URL.Path, "/topics/")
	m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization"))
	region := splitARN(s.iotARN)[3]
	switch {
	case r.Method != http.MethodPost:
		s.refuse("%s %s: HTTPS Publish is a POST", r.Method, r.URL.Path)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	case m == nil || r.Header.Get("X-Amz-Date") == "":
		s.refuse("HTTPS Publish to %s without a SigV4 Authorization and X-Amz-Date", topic)
		writePublishError(w, http.StatusForbidden, "ForbiddenException")
		return
	case m[1] != region || m[2] != "iotdevicegateway":
		s.refuse("HTTPS Publish signed for %s in %s, want iotdevicegateway in %s", m[2], m[1], region)
		writePublishError(w, http.StatusForbidden, "ForbiddenException")
		return
	case topic == "" || strings.ContainsAny(topic, "#+"):
		s.refuse("HTTPS Publish to topic %q", topic)
		writePublishError(w, http.StatusBadRequest, "InvalidRequestException")
		return
	}
	if q := r.URL.Query().Get("qos"); q != "" && q != "0" {
		s.refuse("HTTPS Publish at qos %s: hints are QoS 0", q)
		writePublishError(w, http.StatusBadRequest, "InvalidRequestException")
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, maxPublishBytes+1))
	if err != nil {
		return
	}
	if len(payload) > maxPublishBytes {
		s.refuse("HTTPS Publish of more than %d bytes", maxPublishBytes)
		writePublishError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLargeException")
		return
	}
	s.mu.Lock()
	if len(s.published) < maxPublished {
		s.published = append(s.published, Published{Topic: topic, Payload: payload})
	}
	s.mu.Unlock()
	_ = s.Publish(r.Context(), topic, payload)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"message":"OK","traceId":"iotcoretest"}`)
}

func writePublishError(w http.ResponseWriter, status int, typ string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": typ})
}

// String is the message as "topic payload".
func (p Published) String() string { return p.Topic + " " + string(p.Payload) }
