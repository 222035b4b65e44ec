package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
)

// event is a REST API (payload 1.0) proxy event with body, carrying a
// Range header, a repeated header and a query of two parameters.
func event(body string, base64Encoded bool) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{
		HTTPMethod:                      "POST",
		Path:                            "/workspaces/w/pending-uploads/f/content",
		MultiValueHeaders:               map[string][]string{"Range": {"bytes=1-2"}, "X-Two": {"a", "b"}},
		MultiValueQueryStringParameters: map[string][]string{"redirect": {"1"}, "x y": {"é&"}},
		Body:                            body,
		IsBase64Encoded:                 base64Encoded,
		RequestContext:                  events.APIGatewayProxyRequestContext{RequestID: "req-1", DomainName: "api.example.com"},
	}
}

// TestRequestFromEvent: the handler sees the event's method, path, query
// (rebuilt from the decoded parameters), every header value, and the body
// base64-decoded when the event says so.
func TestRequestFromEvent(t *testing.T) {
	binary := []byte{0, 0xff, 0xfe, 'x'}
	var got *http.Request
	var gotBody []byte
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		gotBody, _ = io.ReadAll(r.Body)
	})
	if _, err := lambdafn.HTTP(h)(context.Background(), event(base64.StdEncoding.EncodeToString(binary), true)); err != nil {
		t.Fatal(err)
	}
	if got.Method != "POST" || got.URL.Path != "/workspaces/w/pending-uploads/f/content" || got.Host != "api.example.com" {
		t.Errorf("request: %s %s host %s", got.Method, got.URL, got.Host)
	}
	if q := got.URL.Query(); q.Get("redirect") != "1" || q.Get("x y") != "é&" || len(q) != 2 {
		t.Errorf("query: got %v", q)
	}
	if got.Header.Get("Range") != "bytes=1-2" || len(got.Header.Values("X-Two")) != 2 {
		t.Errorf("headers: got %v", got.Header)
	}
	if !bytes.Equal(gotBody, binary) {
		t.Errorf("body: got %x, want %x", gotBody, binary)
	}

	resp, err := lambdafn.HTTP(h)(context.Background(), event("not base64!", true))
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body flagged base64 that is not: got %d, %v; want a 400 answer", resp.StatusCode, err)
	}
}

// TestHTTPAnswersBinaryBase64: a buffered answer that is not UTF-8 goes
// back base64-encoded (API Gateway decodes it), text as it is.
func TestHTTPAnswersBinaryBase64(t *testing.T) {
	for _, body := range [][]byte{{0, 0xff, 0x80}, []byte(`{"ok":true}`)} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "x/y")
			w.WriteHeader(http.StatusCreated)
			w.Write(body)
		})
		resp, err := lambdafn.HTTP(h)(context.Background(), event("", false))
		if err != nil {
			t.Fatal(err)
		}
		got := []byte(resp.Body)
		if resp.IsBase64Encoded {
			got, _ = base64.StdEncoding.DecodeString(resp.Body)
		}
		if resp.StatusCode != http.StatusCreated || !bytes.Equal(got, body) || resp.MultiValueHeaders["Content-Type"][0] != "x/y" {
			t.Errorf("answer %x: got %d %x (base64 %v) %v", body, resp.StatusCode, got, resp.IsBase64Encoded, resp.MultiValueHeaders)
		}
	}
}

// TestStream: the status and headers are those at the first WriteHeader
// or Write (a header set later is not sent), the body is the bytes as
// written; a handler that writes nothing answers 200 with no body.
func TestStream(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB, many pipe writes
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1048576")
		w.WriteHeader(http.StatusPartialContent)
		w.Header().Set("X-Late", "1")
		for i := 0; i < len(big); i += 4096 {
			w.Write(big[i : i+4096])
		}
	})
	resp, err := lambdafn.Stream(h)(context.Background(), event("", false))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(body, big) || resp.StatusCode != http.StatusPartialContent {
		t.Fatalf("stream: status %d, %d bytes, %v", resp.StatusCode, len(body), err)
	}
	if resp.MultiValueHeaders["Content-Length"][0] != "1048576" || resp.MultiValueHeaders["X-Late"] != nil {
		t.Errorf("headers: got %v, want those set before WriteHeader only", resp.MultiValueHeaders)
	}

	resp, err = lambdafn.Stream(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))(context.Background(), event("", false))
	if err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(resp.Body); resp.StatusCode != 200 || len(body) != 0 || err != nil {
		t.Errorf("silent handler: got %d, %q, %v; want 200 and no body", resp.StatusCode, body, err)
	}
}

// TestStreamAbort: a handler that aborts (panic(http.ErrAbortHandler),
// as content does when a read fails after the status line) after writing
// part of its answer ends the body with an error, which the runtime turns
// into a failed invocation (the error trailers): the client sees a broken
// transfer, never a short 200. Any other panic does the same.
func TestStreamAbort(t *testing.T) {
	for _, v := range []any{http.ErrAbortHandler, "boom"} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100000")
			w.WriteHeader(http.StatusOK)
			w.Write(make([]byte, 1000))
			panic(v)
		})
		resp, err := lambdafn.Stream(h)(context.Background(), event("", false))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || len(body) != 1000 || err == nil {
			t.Errorf("panic %v: got %d, %d bytes, read error %v; want 200, the 1000 bytes written, then an error", v, resp.StatusCode, len(body), err)
		}
	}
}

// TestRouteByResource: behind a custom domain the event's path carries
// the base path mapping's prefix; the handler sees the route's path, the
// resource with its (escaped) parameters, whatever the event's path.
func TestRouteByResource(t *testing.T) {
	var got *http.Request
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r })
	for _, c := range []struct {
		name       string
		ev         events.APIGatewayProxyRequest
		path, want string // want: the escaped path
	}{
		{"BasePath", events.APIGatewayProxyRequest{
			Resource: "/workspaces/{workspaceId}/pending-uploads/{fileId}/content", Path: "/uploads/workspaces/w/pending-uploads/f/content",
			PathParameters: map[string]string{"workspaceId": "w", "fileId": "f"},
		}, "/workspaces/w/pending-uploads/f/content", "/workspaces/w/pending-uploads/f/content"},
		{"EscapedParameter", events.APIGatewayProxyRequest{
			Resource: "/workspaces/{workspaceId}/pending-uploads", Path: "/v2/workspaces/a%2Fb/pending-uploads",
			PathParameters: map[string]string{"workspaceId": "a/b"},
		}, "/workspaces/a/b/pending-uploads", "/workspaces/a%2Fb/pending-uploads"},
		{"NoResource", events.APIGatewayProxyRequest{Path: "/workspaces/w/pending-uploads"},
			"/workspaces/w/pending-uploads", "/workspaces/w/pending-uploads"},
		{"MissingParameter", events.APIGatewayProxyRequest{
			Resource: "/workspaces/{workspaceId}/pending-uploads", Path: "/workspaces/w/pending-uploads",
		}, "/workspaces/w/pending-uploads", "/workspaces/w/pending-uploads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.ev.HTTPMethod = "GET"
			if _, err := lambdafn.HTTP(h)(context.Background(), c.ev); err != nil {
				t.Fatal(err)
			}
			if got.URL.Path != c.path || got.URL.EscapedPath() != c.want {
				t.Errorf("path: got %q (escaped %q), want %q (%q)", got.URL.Path, got.URL.EscapedPath(), c.path, c.want)
			}
		})
	}
}
