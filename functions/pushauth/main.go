// Command pushauth is AWS IoT Core's custom authorizer for the upload
// hints (internal/push): it admits an MQTT connection whose username is
// a workspace id and whose password a token allowed on it, by the API's
// own look-up, to that workspace's topic only. No API route reaches it.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/push"
)

func main() {
	a := lambdafn.MustInit(config.NeedDatabase, nil)
	lambda.Start(push.NewAuthorizer(a.Store).Handle)
}
