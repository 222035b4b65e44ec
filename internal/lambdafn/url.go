package lambdafn

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

// HTTPOrURL serves h, buffered, to both doors of a function: REST API
// proxy events (payload 1.0, as HTTP) and its Lambda function URL's
// (payload 2.0: version "2.0", rawPath; the poll's cheapest door, README
// "Push"). A function URL with AuthType NONE adds no check of its own:
// h's routes check the bearer as behind the REST API.
func HTTPOrURL(h http.Handler) func(context.Context, json.RawMessage) (any, error) {
	rest := HTTP(h)
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			Version string  `json:"version"`
			RawPath *string `json:"rawPath"`
		}
		if err := json.Unmarshal(raw, &probe); err == nil && probe.Version == "2.0" && probe.RawPath != nil {
			var ev events.LambdaFunctionURLRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				return urlMalformed(), nil
			}
			return serveURL(ctx, h, ev), nil
		}
		var ev events.APIGatewayProxyRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			return malformed, nil
		}
		return rest(ctx, ev)
	}
}

func urlMalformed() events.LambdaFunctionURLResponse {
	return events.LambdaFunctionURLResponse{StatusCode: malformed.StatusCode, Headers: malformed.Headers, Body: malformed.Body}
}

// serveURL answers one function URL event through h.
func serveURL(ctx context.Context, h http.Handler, ev events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	ctx, end := reqlog.Begin(ctx, ev.RequestContext.RequestID)
	defer end()
	ctx, cancel := WithMargin(ctx)
	defer cancel()
	req, err := urlRequest(ctx, ev)
	if err != nil {
		slog.Warn("refused", "reason", "unreadable event", "err", err.Error())
		return urlMalformed()
	}
	w := &bufferedWriter{header: http.Header{}}
	h.ServeHTTP(w, req)
	r := w.response()
	out := events.LambdaFunctionURLResponse{StatusCode: r.StatusCode, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded,
		Headers: map[string]string{}}
	for k, vs := range r.MultiValueHeaders {
		if http.CanonicalHeaderKey(k) == "Set-Cookie" {
			out.Cookies = append(out.Cookies, vs...)
			continue
		}
		out.Headers[k] = strings.Join(vs, ", ")
	}
	return out
}

// urlRequest turns a function URL event into the request h serves: its
// raw path and query as the client sent them, its headers (a header sent
// twice arrives comma-joined, as HTTP allows), its cookies.
func urlRequest(ctx context.Context, ev events.LambdaFunctionURLRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return nil, fmt.Errorf("base64 body: %w", err)
		}
	}
	target := ev.RawPath
	if ev.RawQueryString != "" {
		target += "?" + ev.RawQueryString
	}
	req, err := http.NewRequestWithContext(ctx, strings.ToUpper(ev.RequestContext.HTTP.Method), target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	for k, v := range ev.Headers {
		req.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	req.Host = ev.RequestContext.DomainName
	req.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	req.RequestURI = target
	return req, nil
}
