// Package gatewaytest puts a loopback REST API Gateway in front of the
// real function binaries: each HTTP request becomes the REST API proxy
// event (payload format 1.0) API Gateway would send, is invoked on the
// function that httpapi.Routes names for its route through the Runtime API
// (lambdatest), and the function's answer, buffered or streamed, goes back
// as the HTTP response. A client then runs against the binaries as it
// would against AWS:
//
//	gw := gatewaytest.Start(t, env)   // env: DATABASE_URL=…, ADMIN_TOKEN=…, …
//	c, _ := client.New(gw.URL, token)
//
// What it does as API Gateway does: the stage in the path (/v1), binary
// media types */* (every body base64-encoded), both the single- and the
// multi-value headers and query parameters, its own answers shaped by
// openapi.yaml's gateway responses (a path no route has: 404
// {"error":"not found","code":"not_found"}; others {"error","code":"gateway"}), a 502 for a
// function that fails, a 504 past the 29 s integration timeout, a 413 for
// a request over 10 MB. What it does not: authorizers, throttling,
// custom domains, CORS preflights, concurrency (one process per
// function: its invocations wait in turn), and a new process for a
// function that exited (its later requests answer 502).
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

// Stage is the stage the gateway serves the API under, as a deployed
// REST API does (https://{api}.execute-api.{region}.amazonaws.com/v1).
const Stage = "v1"

// IntegrationTimeout is API Gateway's limit on one integration: past it
// the client gets a 504.
const IntegrationTimeout = 29 * time.Second

// MaxRequestBytes is API Gateway's payload limit for a REST API.
const MaxRequestBytes = 10 << 20

// Gateway is a running gateway: its URL (with the stage) and the function
// processes behind it, by function name.
type Gateway struct {
	URL       string
	Functions map[string]*lambdatest.Runtime
}

// Start builds (once per test binary) and starts every function that
// httpapi.Routes names, each with env (lambdatest.Start's "NAME=value"
// entries), and serves the routes on a loopback port until the test ends.
func Start(tb testing.TB, env []string) *Gateway {
	tb.Helper()
	gw := &Gateway{Functions: map[string]*lambdatest.Runtime{}}
	for _, rt := range httpapi.Routes {
		if gw.Functions[rt.Function] == nil {
			gw.Functions[rt.Function] = lambdatest.Start(tb, lambdatest.Build(tb, rt.Function), env)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), lambdatest.DefaultTimeout)
	defer cancel()
	for name, fn := range gw.Functions {
		if err := fn.WaitInit(ctx); err != nil {
			tb.Fatalf("gatewaytest: function %s: %v", name, err)
		}
	}
	mux := http.NewServeMux()
	for _, rt := range httpapi.Routes {
		mux.Handle(rt.Method+" /"+Stage+rt.Path, &integration{route: rt, fn: gw.Functions[rt.Function]})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		gatewayError(w, http.StatusNotFound, "not found") // MISSING_AUTHENTICATION_TOKEN, as openapi.yaml configures it
	})
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	gw.URL = srv.URL + "/" + Stage
	return gw
}

// integration is one route's Lambda proxy integration.
type integration struct {
	route httpapi.Route
	fn    *lambdatest.Runtime
}

func (in *integration) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		gatewayError(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(body) > MaxRequestBytes {
		gatewayError(w, http.StatusRequestEntityTooLarge, "Request Too Long")
		return
	}
	ev, err := json.Marshal(Event(r, in.route, body))
	if err != nil {
		gatewayError(w, http.StatusInternalServerError, "Internal server error")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), IntegrationTimeout)
	defer cancel()
	res, err := in.fn.Invoke(ctx, ev)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		gatewayError(w, http.StatusGatewayTimeout, "Endpoint request timed out")
		return
	case err != nil || res.Err != nil:
		gatewayError(w, http.StatusBadGateway, "Internal server error")
		return
	}
	if err := writeResult(w, res); err != nil {
		gatewayError(w, http.StatusBadGateway, "Internal server error")
	}
}

// Event is the REST API proxy event API Gateway makes of r, a request
// for route whose body is body (read already): the route's template as
// the resource, its path parameters, the path without the stage, the
// headers and query parameters in both forms, and the body
// base64-encoded (binary media types */*).
func Event(r *http.Request, route httpapi.Route, body []byte) events.APIGatewayProxyRequest {
	path := strings.TrimPrefix(r.URL.Path, "/"+Stage)
	params := map[string]string{}
	for _, seg := range strings.Split(route.Path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			params[name] = r.PathValue(name)
		}
	}
	headers := map[string]string{}
	multi := map[string][]string{}
	for k, vs := range r.Header {
		headers[k] = vs[len(vs)-1]
		multi[k] = vs
	}
	if r.Host != "" {
		headers["Host"], multi["Host"] = r.Host, []string{r.Host}
	}
	ev := events.APIGatewayProxyRequest{
		Resource:          route.Path,
		Path:              path,
		HTTPMethod:        r.Method,
		Headers:           headers,
		MultiValueHeaders: multi,
		RequestContext: events.APIGatewayProxyRequestContext{
			AccountID:        lambdatest.DefaultAccountID,
			APIID:            "gatewaytest",
			DomainName:       r.Host,
			HTTPMethod:       r.Method,
			Identity:         events.APIGatewayRequestIdentity{SourceIP: sourceIP(r), UserAgent: r.UserAgent()},
			Path:             "/" + Stage + path,
			Protocol:         r.Proto,
			RequestID:        uuid.NewString(),
			RequestTimeEpoch: time.Now().UnixMilli(),
			ResourcePath:     route.Path,
			Stage:            Stage,
		},
	}
	if len(params) > 0 {
		ev.PathParameters = params
	}
	if q := r.URL.Query(); len(q) > 0 {
		ev.QueryStringParameters = map[string]string{}
		ev.MultiValueQueryStringParameters = map[string][]string{}
		for k, vs := range q {
			ev.QueryStringParameters[k] = vs[len(vs)-1]
			ev.MultiValueQueryStringParameters[k] = vs
		}
	}
	if len(body) > 0 {
		ev.Body = base64.StdEncoding.EncodeToString(body)
		ev.IsBase64Encoded = true
	}
	return ev
}

func sourceIP(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndex(host, ":"); i >= 0 {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}

// writeResult writes a function's answer as API Gateway does: the
// status, the headers (single- and multi-value), the body decoded from
// base64 when flagged; a streamed answer's prelude, then its body.
func writeResult(w http.ResponseWriter, res lambdatest.Result) error {
	var resp events.APIGatewayProxyResponse
	var body []byte
	if res.Streamed {
		prelude, b, err := lambdatest.SplitStreamed(res.Payload)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(prelude, &resp); err != nil {
			return fmt.Errorf("streamed prelude: %w", err)
		}
		body = b
	} else {
		if err := json.Unmarshal(res.Payload, &resp); err != nil {
			return fmt.Errorf("response: %w", err)
		}
		body = []byte(resp.Body)
		if resp.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(resp.Body)
			if err != nil {
				return fmt.Errorf("response body flagged base64: %w", err)
			}
			body = b
		}
	}
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		return fmt.Errorf("response status %d", resp.StatusCode)
	}
	h := w.Header()
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, bytes.NewReader(body))
	return nil
}

// gatewayError is one of API Gateway's own answers, as openapi.yaml's
// x-amazon-apigateway-gateway-responses shape them: {"error": …, "code":
// "gateway"}, and an unknown route 404 {"error":"not found","code":"not_found"},
// each with Referrer-Policy: no-referrer.
func gatewayError(w http.ResponseWriter, status int, msg string) {
	code := "gateway"
	if status == http.StatusNotFound {
		code = "not_found"
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"error": msg, "code": code})
	_, _ = w.Write(b)
}
