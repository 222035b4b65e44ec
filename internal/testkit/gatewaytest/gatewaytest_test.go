package gatewaytest

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
)

// TestEvent: a request becomes the event API Gateway would send: the
// route's template as resource, its path parameters, the path without
// the stage, headers and query in both forms, the body base64-encoded;
// a request without a body has none.
func TestEvent(t *testing.T) {
	route := httpapi.ContentRoute
	var got []events.APIGatewayProxyRequest
	mux := http.NewServeMux()
	mux.HandleFunc(route.Method+" /"+Stage+route.Path, func(w http.ResponseWriter, r *http.Request) {
		body := new(bytes.Buffer)
		body.ReadFrom(r.Body)
		got = append(got, Event(r, route, body.Bytes()))
	})

	req := httptest.NewRequest("GET", "/v1/workspaces/w%201/pending-uploads/f1/content?redirect=1&x=a&x=b", bytes.NewReader([]byte{0xff, 0x00}))
	req.Header.Add("Authorization", "Bearer t")
	req.Header.Add("X-Twice", "one")
	req.Header.Add("X-Twice", "two")
	mux.ServeHTTP(httptest.NewRecorder(), req)
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/workspaces/w/pending-uploads/f/content", nil))
	if len(got) != 2 {
		t.Fatalf("events: got %d, want 2", len(got))
	}
	ev := got[0]
	for name, c := range map[string][2]any{
		"Resource":         {ev.Resource, route.Path},
		"ResourcePath":     {ev.RequestContext.ResourcePath, route.Path},
		"Path":             {ev.Path, "/workspaces/w 1/pending-uploads/f1/content"},
		"ContextPath":      {ev.RequestContext.Path, "/v1/workspaces/w 1/pending-uploads/f1/content"},
		"Stage":            {ev.RequestContext.Stage, Stage},
		"HTTPMethod":       {ev.HTTPMethod, "GET"},
		"PathParameters":   {ev.PathParameters, map[string]string{"workspaceId": "w 1", "fileId": "f1"}},
		"Query":            {ev.QueryStringParameters, map[string]string{"redirect": "1", "x": "b"}},
		"MultiValueQuery":  {ev.MultiValueQueryStringParameters, map[string][]string{"redirect": {"1"}, "x": {"a", "b"}}},
		"Header":           {ev.Headers["X-Twice"], "two"},
		"MultiValueHeader": {ev.MultiValueHeaders["X-Twice"], []string{"one", "two"}},
		"Authorization":    {ev.Headers["Authorization"], "Bearer t"},
		"Body":             {ev.Body, base64.StdEncoding.EncodeToString([]byte{0xff, 0x00})},
		"IsBase64Encoded":  {ev.IsBase64Encoded, true},
		"NoBody":           {got[1].Body, ""},
		"NoBodyNotEncoded": {got[1].IsBase64Encoded, false},
		"NoQuery":          {got[1].QueryStringParameters, map[string]string(nil)},
	} {
		if !reflect.DeepEqual(c[0], c[1]) {
			t.Errorf("%s: got %#v, want %#v", name, c[0], c[1])
		}
	}
	if ev.RequestContext.RequestID == "" || ev.RequestContext.RequestID == got[1].RequestContext.RequestID {
		t.Errorf("request IDs: %q and %q, want two different ones", ev.RequestContext.RequestID, got[1].RequestContext.RequestID)
	}
}
