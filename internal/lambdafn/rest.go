package lambdafn

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

// malformed answers an event that cannot be turned into a request (a body
// that claims base64 and is not): the client's fault, never a Go error,
// which API Gateway would turn into a 502.
var malformed = events.APIGatewayProxyResponse{
	StatusCode: http.StatusBadRequest,
	Headers:    map[string]string{"Content-Type": "application/json"},
	Body:       `{"error":"malformed request","code":"malformed_request"}` + "\n",
}

// HTTP serves h to REST API proxy events and answers buffered: what h
// writes is returned whole (a Lambda answer is at most 6 MB). A body that
// is not UTF-8 goes back base64-encoded, and API Gateway decodes it.
func HTTP(h http.Handler) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		ctx, end := reqlog.Begin(ctx, ev.RequestContext.RequestID)
		defer end()
		ctx, cancel := WithMargin(ctx)
		defer cancel()
		req, err := request(ctx, ev)
		if err != nil {
			slog.Warn("refused", "reason", "unreadable event", "err", err.Error())
			return malformed, nil
		}
		w := &bufferedWriter{header: http.Header{}}
		h.ServeHTTP(w, req)
		return w.response(), nil
	}
}

// request turns a REST API proxy event into the request h serves. API
// Gateway has already split the query string into parameters (decoded),
// so it is rebuilt from them; the path is the route's (see routePath).
func request(ctx context.Context, ev events.APIGatewayProxyRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return nil, fmt.Errorf("base64 body: %w", err)
		}
	}
	q := url.Values{}
	for k, vs := range ev.MultiValueQueryStringParameters {
		q[k] = append(q[k], vs...)
	}
	if len(ev.MultiValueQueryStringParameters) == 0 {
		for k, v := range ev.QueryStringParameters {
			q.Set(k, v)
		}
	}
	u := routePath(ev)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, strings.ToUpper(ev.HTTPMethod), u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	if len(ev.MultiValueHeaders) > 0 {
		for k, vs := range ev.MultiValueHeaders {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
	} else {
		for k, v := range ev.Headers {
			req.Header.Set(k, v)
		}
	}
	req.Host = ev.RequestContext.DomainName
	req.RemoteAddr = ev.RequestContext.Identity.SourceIP
	req.RequestURI = u.RequestURI()
	return req, nil
}

// routePath is the path the handlers route by: the event's resource (the
// route's template, "/workspaces/{workspaceId}/pending-uploads") with
// its path parameters put back, escaped. The event's path is not it
// behind a custom domain, whose base path mapping puts the base path in
// front ("/uploads/workspaces/…"). An event without a resource, or
// missing one of its parameters, keeps its path.
func routePath(ev events.APIGatewayProxyRequest) *url.URL {
	if ev.Resource == "" {
		return &url.URL{Path: ev.Path}
	}
	segs := strings.Split(ev.Resource, "/")
	raw := make([]string, len(segs))
	for i, seg := range segs {
		raw[i] = seg
		if !strings.HasPrefix(seg, "{") || !strings.HasSuffix(seg, "}") {
			continue
		}
		v, ok := ev.PathParameters[strings.TrimSuffix(strings.Trim(seg, "{}"), "+")]
		if !ok {
			return &url.URL{Path: ev.Path}
		}
		segs[i], raw[i] = v, url.PathEscape(v)
	}
	return &url.URL{Path: strings.Join(segs, "/"), RawPath: strings.Join(raw, "/")}
}

// bufferedWriter collects an answer for HTTP.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedWriter) Header() http.Header { return w.header }

func (w *bufferedWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufferedWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

func (w *bufferedWriter) response() events.APIGatewayProxyResponse {
	w.WriteHeader(http.StatusOK)
	resp := events.APIGatewayProxyResponse{StatusCode: w.status, MultiValueHeaders: w.header}
	if b := w.body.Bytes(); utf8.Valid(b) {
		resp.Body = string(b)
	} else {
		resp.Body = base64.StdEncoding.EncodeToString(b)
		resp.IsBase64Encoded = true
	}
	return resp
}

// Stream serves h to REST API proxy events through Lambda response
// streaming (the integration's transfer mode is STREAM): the status and
// headers go as soon as h writes them, then the body as h writes it, so
// memory holds what h holds, never the whole answer. h runs on after this
// function returns, until the runtime has sent its last byte; the
// invocation's context ends then. If h aborts its answer
// (panic(http.ErrAbortHandler)) after the status, the stream ends with an
// error, which Lambda reports and API Gateway cuts: the client sees a
// broken transfer, never a short file.
func Stream(h http.Handler) func(context.Context, events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
		ctx, end := reqlog.Begin(ctx, ev.RequestContext.RequestID)
		ctx, cancel := WithMargin(ctx)
		req, err := request(ctx, ev)
		if err != nil {
			slog.Warn("refused", "reason", "unreadable event", "err", err.Error())
			cancel()
			end()
			return &events.APIGatewayProxyStreamingResponse{
				StatusCode: malformed.StatusCode, Headers: malformed.Headers, Body: strings.NewReader(malformed.Body),
			}, nil
		}
		pr, pw := io.Pipe()
		w := &streamWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
		go func() {
			defer end()
			defer cancel()
			defer func() {
				if v := recover(); v != nil {
					if v != http.ErrAbortHandler {
						slog.Error("handler panicked", "panic", fmt.Sprint(v))
					}
					select {
					case <-w.started:
						// The status went out: end the body with an error.
						pw.CloseWithError(fmt.Errorf("answer aborted: %v", v))
					default:
						// Nothing went out yet: a plain 500, never a 200.
						w.header = http.Header{"Content-Type": {"application/json"}}
						w.status = http.StatusInternalServerError
						w.start()
						_, _ = pw.Write([]byte(`{"error":"storage error","code":"internal"}` + "\n"))
						pw.Close()
					}
					return
				}
				w.start()
				pw.Close()
			}()
			h.ServeHTTP(w, req)
		}()
		<-w.started
		return &events.APIGatewayProxyStreamingResponse{
			StatusCode:        w.status,
			MultiValueHeaders: w.sent,
			Body:              pr,
		}, nil
	}
}

// streamWriter pipes h's answer to the runtime: the status and a copy of
// the headers are fixed by the first WriteHeader or Write.
type streamWriter struct {
	header  http.Header
	sent    http.Header
	status  int
	pw      *io.PipeWriter
	started chan struct{}
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	w.start()
}

// start fixes the status (200 if h wrote none) and the headers, and lets
// Stream return.
func (w *streamWriter) start() {
	select {
	case <-w.started:
		return
	default:
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.sent = w.header.Clone()
	close(w.started)
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush is a no-op: every Write goes to the runtime as it comes.
func (w *streamWriter) Flush() {}
