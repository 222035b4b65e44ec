// Package reqlog puts the ids of the current request on every log line, so
// that one request can be followed across API Gateway's access log and the
// function's own lines:
//
//   - aws_request_id: the Lambda invocation's id (the platform's START,
//     END and REPORT lines carry the same);
//   - apigw_request_id: API Gateway's requestContext.requestId, which the
//     access log writes as $context.requestId;
//   - cold_start: true on the lines of a process's first invocation;
//   - request_id: the dev server's own id for a request (X-Request-Id).
//
// Wrap the process's slog handler with NewHandler, and start each
// invocation with Begin (the Lambda door) or each request with
// WithRequestID (the dev server).
//
// Where the ids come from, for each line: the context the line was logged
// with (slog's *Context methods), else the invocation that is running. A
// Lambda process serves one invocation at a time, so Begin also records
// the invocation process-wide, and lines logged without a context (most
// of the code logs with Info, not InfoContext) carry its ids as well. With
// concurrent invocations in one process (AWS_LAMBDA_MAX_CONCURRENCY > 1)
// there is no single current invocation: only lines logged with the
// invocation's context carry its ids. The dev server serves requests
// concurrently too, so the same holds there.
package reqlog

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Field names on the log lines (and on metric lines, see Fields).
const (
	KeyAWSRequestID   = "aws_request_id"
	KeyAPIGWRequestID = "apigw_request_id"
	KeyColdStart      = "cold_start"
	KeyRequestID      = "request_id"
)

// ids are one request's: empty members are left off the lines.
type ids struct {
	aws, apigw, request string
	cold                bool
}

func (v *ids) attrs() []slog.Attr {
	as := make([]slog.Attr, 0, 4)
	if v.aws != "" {
		as = append(as, slog.String(KeyAWSRequestID, v.aws))
	}
	if v.apigw != "" {
		as = append(as, slog.String(KeyAPIGWRequestID, v.apigw))
	}
	if v.request != "" {
		as = append(as, slog.String(KeyRequestID, v.request))
	}
	if v.cold {
		as = append(as, slog.Bool(KeyColdStart, true))
	}
	return as
}

type ctxKey struct{}

var (
	// invoked is set by the process's first Begin: the next ones are warm.
	invoked atomic.Bool
	// current is the running invocation's ids, when one process serves
	// one invocation at a time; nil between invocations.
	current atomic.Pointer[ids]
)

// Begin starts an invocation: it returns ctx carrying the invocation's ids
// (the Lambda request id from ctx's lambdacontext, apigwRequestID, which
// is empty for events that do not come from API Gateway, and cold_start
// on the process's first call) and records them as the running
// invocation's until end is called. Call it at the top of each Lambda
// handler:
//
//	ctx, end := reqlog.Begin(ctx, ev.RequestContext.RequestID)
//	defer end()
func Begin(ctx context.Context, apigwRequestID string) (_ context.Context, end func()) {
	v := &ids{apigw: apigwRequestID, cold: !invoked.Swap(true)}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		v.aws = lc.AwsRequestID
	}
	ctx = context.WithValue(ctx, ctxKey{}, v)
	if lambdacontext.MaxConcurrency() > 1 {
		return ctx, func() {}
	}
	current.Store(v)
	return ctx, func() { current.CompareAndSwap(v, nil) }
}

// WithRequestID returns ctx carrying a request id of the caller's (the dev
// server's): lines logged with the context carry it as request_id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, &ids{request: id})
}

// lookup returns the ids of ctx, else those of the running invocation.
func lookup(ctx context.Context) *ids {
	if ctx != nil {
		if v, ok := ctx.Value(ctxKey{}).(*ids); ok {
			return v
		}
	}
	return current.Load()
}

// Fields returns the running invocation's ids as a map (nil between
// invocations), for lines written without slog: the metrics' EMF lines.
func Fields() map[string]any {
	v := current.Load()
	if v == nil {
		return nil
	}
	m := make(map[string]any, 4)
	for _, a := range v.attrs() {
		m[a.Key] = a.Value.Any()
	}
	return m
}

// NewHandler returns a handler that adds the request's ids (see the
// package doc) to each record, as top-level attributes after the record's
// own, and passes it to next. Under a group (Logger.WithGroup) they land
// inside the group: the service logs no groups.
func NewHandler(next slog.Handler) slog.Handler { return handler{next} }

type handler struct{ next slog.Handler }

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if v := lookup(ctx); v != nil {
		r = r.Clone()
		r.AddAttrs(v.attrs()...)
	}
	return h.next.Handle(ctx, r)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler { return handler{h.next.WithAttrs(as)} }

func (h handler) WithGroup(name string) slog.Handler { return handler{h.next.WithGroup(name)} }
