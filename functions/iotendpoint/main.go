// Command iotendpoint is the CloudFormation custom resource that looks up
// the account's AWS IoT Core data endpoint at deploy time, so that push
// is on from zero (internal/iotendpoint). It runs outside the stack's
// network and answers CloudFormation even when it cannot be set up.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/iotendpoint"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

func main() {
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(os.Stdout, nil)))
	lambda.Start(cfn.LambdaWrap(iotendpoint.New(os.Getenv, log).Handle))
}
