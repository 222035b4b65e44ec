// Command admin is the Lambda function that creates, lists and revokes
// workspace tokens (internal/admin), invoked with IAM
// (lambda:InvokeFunction) by `pendingctl token --function|--stack`: no
// API route reaches it.
package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
)

func main() {
	a := lambdafn.MustInit(config.NeedDatabase, nil)
	svc := admin.New(a.DB)
	lambda.Start(func(ctx context.Context, payload json.RawMessage) (admin.Answer, error) {
		// An operator's command may be what wakes a paused database (it
		// resumes in about 15 s): wait for it within the function's
		// timeout rather than fail the command (app.WaitForDatabase).
		ctx, cancel := lambdafn.WithMargin(ctx)
		defer cancel()
		_ = a.WaitForDatabase(ctx, AdminDatabaseWait) // on failure, the request fails on the same error
		return svc.Invoke(ctx, payload)
	})
}

// AdminDatabaseWait is the admin function's wait for a paused database:
// less than lambdafn.DatabaseWait, within its 25 s timeout.
const AdminDatabaseWait = 18 * time.Second
