// Command migrate is the CloudFormation custom resource that applies the
// embedded migrations on every deploy, so a fresh `sam deploy` yields a
// working schema and a failed migration fails the deploy. Deleting the
// stack leaves the schema (and its data) alone.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
	"github.com/pendinguploads/pendinguploads/migrations"
)

// physicalID stays the same across updates: CloudFormation would read a
// new one as a replacement and delete the old.
const physicalID = "pendinguploads-schema"

func main() {
	a := lambdafn.MustInit(config.NeedDatabase, nil)
	lambda.Start(cfn.LambdaWrap(func(ctx context.Context, ev cfn.Event) (string, map[string]any, error) {
		ctx, end := reqlog.Begin(ctx, "")
		defer end()
		if ev.RequestType == cfn.RequestDelete {
			a.Logger.Info("stack delete: schema left in place")
			return physicalID, nil, nil
		}
		ctx, cancel := lambdafn.WithMargin(ctx)
		defer cancel()
		if err := migrations.Up(ctx, a.DatabaseURL); err != nil {
			a.Logger.Error("migrate failed", "err", err.Error(), "request_type", ev.RequestType)
			return physicalID, nil, err
		}
		v, _, err := migrations.Version(ctx, a.DatabaseURL)
		if err != nil {
			return physicalID, nil, err
		}
		a.Logger.Info("migrated", "version", v, "request_type", ev.RequestType)
		return physicalID, map[string]any{"Version": v}, nil
	}))
}
