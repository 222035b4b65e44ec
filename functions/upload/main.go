// Command upload is the Lambda function behind POST /workspaces/{workspaceId}/chat/uploads.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
)

func main() {
	a := lambdafn.MustInit(config.NeedDatabase|config.NeedAdminToken, s3blobs.OpenBucket)
	lambda.Start(lambdafn.HTTP(a.API.Handler(httpapi.RoutesOf("upload")...)))
}
