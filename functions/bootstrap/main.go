// Command bootstrap is the CloudFormation custom resource that prepares
// what the in-VPC functions need without Secrets Manager at run time
// (internal/bootstrap): the database role they connect as with IAM
// database authentication, made through the RDS Data API, and the admin
// token's SHA-256. It runs outside the stack's network and answers
// CloudFormation even when it cannot be set up.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/bootstrap"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

func main() {
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(os.Stdout, nil)))
	lambda.Start(cfn.LambdaWrap(bootstrap.New(os.Getenv, log).Handle))
}
