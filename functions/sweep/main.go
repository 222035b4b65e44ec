// Command sweep is the scheduled sweep (EventBridge, the template's
// SweepEvery): it deletes acked rows past ACK_RETENTION and unacked rows
// past expires_at, with their objects, and the objects of rows that never
// committed. It returns {"acked":n,"expired":m,"orphans":k}, with
// "unfinished":true when it stopped near its deadline (the next run
// resumes), or an error so that Lambda records a failed run. Each run
// ends with its connections closed (app.CloseIdle): the process sleeps
// until the next run, and the database may pause meanwhile; so each run
// first waits for the database (app.WaitForDatabase, lambdafn.DatabaseWait):
// it is what wakes a paused one.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/sweep"
)

func main() {
	a := lambdafn.MustInit(config.NeedDatabase, s3blobs.OpenBucket)
	lambda.Start(func(ctx context.Context, _ events.EventBridgeEvent) (pendinguploads.SweepResult, error) {
		ctx, end := reqlog.Begin(ctx, "")
		defer end()
		ctx, cancel := lambdafn.WithMargin(ctx)
		defer cancel()
		defer a.CloseIdle(ctx)
		_ = a.WaitForDatabase(ctx, lambdafn.DatabaseWait) // on failure, the run fails on the same error
		return sweep.Run(ctx, a.Store, a.Config.AckRetention, a.Logger, a.Metrics)
	})
}
