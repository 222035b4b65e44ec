// Command hello is a test-only Lambda function: it is not deployed (it is
// not under functions/, and has no entry in template.yaml or lambda.mk).
// lambdatest tests its Runtime API harness with it, and cold-start
// benchmarks use it as the hello-world baseline.
//
// It echoes its event, with three exceptions that exercise the harness:
// {"fail":true} returns an error, {"exit":true} exits mid-invocation, and
// with HELLO_REQUIRE=1 it fails its init unless HELLO_REQUIRED is set.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if os.Getenv("HELLO_REQUIRE") == "1" && os.Getenv("HELLO_REQUIRED") == "" {
		log.Error("config: HELLO_REQUIRED is not set")
		os.Exit(1)
	}
	lambda.Start(handle)
}

func handle(ctx context.Context, event json.RawMessage) (json.RawMessage, error) {
	var e struct {
		Fail bool `json:"fail"`
		Exit bool `json:"exit"`
	}
	json.Unmarshal(event, &e)
	switch {
	case e.Fail:
		return nil, errors.New("hello: asked to fail")
	case e.Exit:
		os.Exit(3)
	}
	return event, nil
}
