// Package lambdafn is the little that every Lambda main shares: build the
// app from the environment or stop with the variable's name, and serve an
// http.Handler to API Gateway REST API proxy events (payload format 1.0),
// buffered (HTTP) or streamed (Stream). The adapter (rest.go) is our own,
// not the design card's aws-lambda-go-api-proxy: that has no response
// streaming, and it writes plain-text logs.
package lambdafn

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

// MustInit reads the configuration and assembles the app, with the bucket
// that openBucket opens (nil for a function that touches no object: it
// then links no S3 client). On a bad or missing setting, or a secret it
// cannot read, it logs one JSON line naming the variable (Init's) and
// exits with status 1: Lambda records a failed init, and nothing is
// guessed.
func MustInit(need config.Requirement, openBucket app.BucketOpener) *app.App {
	a, err := Init(need, openBucket)
	if err != nil {
		os.Exit(1)
	}
	return a
}

// Init is MustInit without the exit, for a function that must answer its
// caller even when it cannot be set up (the migrate custom resource
// answers CloudFormation, which otherwise waits for its timeout). It sets
// the JSON logger as slog's default either way, logs one "init failed"
// line naming the variable at fault, and returns that error with a nil
// app.
func Init(need config.Requirement, openBucket app.BucketOpener) (*app.App, error) {
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(os.Stdout, nil)))
	slog.SetDefault(log)
	cfg, err := config.Load(os.Getenv, need)
	if err != nil {
		log.Error("init failed", "err", err.Error())
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg, app.Options{Logger: log, MetricsOut: os.Stdout, OpenBucket: openBucket})
	if err != nil {
		log.Error("init failed", "err", err.Error())
		return nil, err
	}
	a.Metrics.Fields = reqlog.Fields
	if a.API != nil {
		a.API.AfterAnswer = (&afterAnswer{}).run
	}
	return a, nil
}

// afterAnswer runs an HTTP function's work off its answer's path
// (httpapi.API.AfterAnswer: the token stamp), on a goroutine of its own,
// one at a time: the invocation's answer goes to the runtime meanwhile.
// Work handed over while one runs is dropped: a stamp is best-effort, and
// the database still finds it due at the token's next request. Once the
// answer is sent, Lambda may freeze the process before the work ends; it
// resumes at the next invocation, and a stamp cut by its own deadline
// meanwhile is likewise taken again later. At most one stamp runs beside
// the next invocation, on one of the pool's connections, for at most
// pendinguploads.CleanupBudget.
type afterAnswer struct{ busy atomic.Bool }

func (a *afterAnswer) run(work func()) {
	if !a.busy.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer a.busy.Store(false)
		work()
	}()
}

// Margin is kept back from the invocation's deadline, so that a slow
// dependency ends in our 503 rather than in the platform's timeout: it
// covers the bounded cleanup after a failure (pendinguploads.CleanupBudget)
// and writing the answer.
const Margin = pendinguploads.CleanupBudget + time.Second

// DatabaseWait is how long a scheduled run, or an EventBridge event's,
// waits for its database before its work (app.WaitForDatabase): a paused
// Aurora Serverless v2 resumes in about 15 s, 30 s after a day paused. The
// functions that wait have timeouts well beyond it (template.yaml).
const DatabaseWait = 45 * time.Second

// WithMargin returns ctx with its deadline moved Margin earlier.
func WithMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-Margin))
	}
	return context.WithCancel(ctx)
}
