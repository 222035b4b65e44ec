// Command presign is the Lambda function behind the presign routes: POST
// /workspaces/{workspaceId}/chat/uploads/presign, and the resume (POST) and
// abort (DELETE) of /workspaces/{workspaceId}/chat/uploads/presign/{uploadId}
// (httpapi.RoutesOf("presign")).
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
	lambda.Start(lambdafn.HTTP(a.API.Handler(httpapi.RoutesOf("presign")...)))
}
