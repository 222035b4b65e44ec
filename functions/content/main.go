// Command content is the Lambda function behind GET /workspaces/{workspaceId}/pending-uploads/{fileId}/content
// and the download links: POST .../{fileId}/link, GET .../{fileId}/download.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
)

func main() {
	a := lambdafn.MustInit(config.NeedDatabase|config.NeedAdminToken|config.NeedLinkKey, s3blobs.OpenBucket)
	lambda.Start(lambdafn.Stream(a.API.Handler(httpapi.RoutesOf("content")...)))
}
