// Command pushrelay publishes the upload hints the upload function writes
// to the hint table (PUSH_HINT_TABLE) to AWS IoT Core's data endpoint
// (PUSH_ENDPOINT), read from the table's stream: outside the stack's
// network, so that no function in it needs IoT Core's data endpoint
// (internal/push.Relay; docs/push.md). No API route reaches it.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

func main() {
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(os.Stdout, nil)))
	slog.SetDefault(log)
	awsCfg, err := awsenv.Load(os.Getenv, log)
	if err != nil {
		log.Error("init failed", "err", err.Error())
		os.Exit(1)
	}
	iot, err := push.NewIoT(os.Getenv("PUSH_ENDPOINT"), awsCfg)
	if err != nil {
		log.Error("init failed", "err", "PUSH_ENDPOINT: "+err.Error())
		os.Exit(1)
	}
	lambda.Start((&push.Relay{Publisher: iot, Logger: log}).Handle)
}
