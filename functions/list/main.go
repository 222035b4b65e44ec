// Command list is the Lambda function behind GET
// /workspaces/{workspaceId}/pending-uploads and the public GET /uploads/limits
// (httpapi.RoutesOf("list")), through the REST API and through its function URL
// (the poll's cheapest door).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
)

func main() {
	a := lambdafn.MustInit(config.NeedDatabase|config.NeedAdminToken, nil)
	lambda.Start(lambdafn.HTTPOrURL(a.API.Handler(httpapi.RoutesOf("list")...)))
}
