// Command migrate is the CloudFormation custom resource that applies the
// embedded migrations on every deploy, so a fresh `sam deploy` yields a
// working schema and a failed migration fails the deploy. Deleting the
// stack leaves the schema (and its data) alone. It answers CloudFormation
// even when it cannot be set up (internal/schemaresource).
package main

import (
	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/schemaresource"
)

func main() {
	a, err := lambdafn.Init(config.NeedDatabase, nil)
	lambda.Start(cfn.LambdaWrap(schemaresource.New(a, err).Handle))
}
