// Command scanresult applies GuardDuty Malware Protection for S3's scan
// results to the files they name (MalwareScanning=guardduty;
// docs/scanning.md): the EventBridge rule on "GuardDuty Malware
// Protection Object Scan Result" delivers each result, and a schedule
// gives the SCAN_UNDECIDED policy to files whose scan never answered
// within SCAN_TIMEOUT. A failed invocation is an error, so that
// EventBridge delivers the event again.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/scanresult"
)

func main() {
	a := lambdafn.MustInit(config.NeedDatabase, s3blobs.OpenBucket)
	h := scanresult.New(a.Store, a.Config, a.Logger, a.Metrics)
	lambda.Start(func(ctx context.Context, ev events.EventBridgeEvent) error {
		ctx, end := reqlog.Begin(ctx, "")
		defer end()
		ctx, cancel := lambdafn.WithMargin(ctx)
		defer cancel()
		// The schedule wakes a paused database, as the sweep does, and a
		// result may come to one paused since its upload: wait for it
		// (lambdafn.DatabaseWait) rather than fail, and alarm, at every wake.
		_ = a.WaitForDatabase(ctx, lambdafn.DatabaseWait) // on failure, the work fails on the same error
		if ev.DetailType == scanresult.ScheduledEvent {
			defer a.CloseIdle(ctx) // as the sweep's: the process sleeps until the next run
			return h.Overdue(ctx)
		}
		return h.Handle(ctx, ev)
	})
}
