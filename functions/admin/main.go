// Command admin is the Lambda function that creates, lists and revokes
// workspace tokens (internal/admin), invoked with IAM
// (lambda:InvokeFunction) by `pendingctl token --function|--stack`: no
// API route reaches it.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
)

func main() {
	a := lambdafn.MustInit(config.NeedDatabase, nil)
	lambda.Start(admin.New(a.DB).Invoke)
}
