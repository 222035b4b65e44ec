// Package lambdafn is the little that every Lambda main shares: build the
// app from the environment or stop with the variable's name, and adapt an
// http.Handler to API Gateway HTTP API (payload 2.0) events.
package lambdafn

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"net/http"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

// MustInit reads the configuration and assembles the app. On a bad or
// missing setting it logs one JSON line naming the variable and exits
// with status 1: Lambda records a failed init, and nothing is guessed.
func MustInit(need config.Requirement) *app.App {
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(os.Stdout, nil)))
	slog.SetDefault(log)
	cfg, err := config.Load(os.Getenv, need)
	if err != nil {
		log.Error("init failed", "err", err.Error())
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg, app.Options{Logger: log, MetricsOut: os.Stdout})
	if err != nil {
		log.Error("init failed", "err", err.Error())
		os.Exit(1)
	}
	a.Metrics.Fields = reqlog.Fields
	return a
}

// Margin is kept back from the invocation's deadline, so that a slow
// dependency ends in our 503 rather than in the platform's timeout: it
// covers the bounded cleanup after a failure (pendinguploads.CleanupBudget)
// and writing the answer.
const Margin = pendinguploads.CleanupBudget + time.Second

// WithMargin returns ctx with its deadline moved Margin earlier.
func WithMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-Margin))
	}
	return context.WithCancel(ctx)
}

// HTTP adapts h to HTTP API events. Binary bodies survive both ways: the
// request body is base64-decoded when the event says so, and a response
// body that is not UTF-8 goes back base64-encoded.
func HTTP(h http.Handler) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	adapter := httpadapter.NewV2(h)
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		ctx, end := reqlog.Begin(ctx, ev.RequestContext.RequestID)
		defer end()
		ctx, cancel := WithMargin(ctx)
		defer cancel()
		resp, err := adapter.ProxyWithContext(ctx, ev)
		if err != nil {
			// Only an event the adapter cannot turn into a request (a body
			// that claims base64 and is not) gets here: the client's fault.
			slog.Warn("refused", "reason", "unreadable event", "err", err.Error())
			return events.APIGatewayV2HTTPResponse{
				StatusCode: http.StatusBadRequest,
				Headers:    map[string]string{"Content-Type": "application/json"},
				Body:       `{"error":"malformed request"}` + "\n",
			}, nil
		}
		return resp, nil
	}
}
