package app

import (
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/push"
)

// hints is the store's Notifier: upload hints written to the hint table
// when PUSH_HINT_TABLE is set (the relay, functions/pushrelay, publishes
// them: the template's way, so that no function in the stack's network
// needs IoT Core's data endpoint), else published through AWS IoT Core's
// Publish when PUSH_ENDPOINT is set; nil otherwise (the dev server sets
// its local broker's).
func hints(cfg config.Config, awsConfig func() (aws.Config, error), log *slog.Logger) (pendinguploads.Notifier, error) {
	if cfg.PushHintTable == "" && cfg.PushEndpoint == "" {
		return nil, nil
	}
	awsCfg, err := awsConfig()
	if err != nil {
		return nil, err
	}
	if cfg.PushHintTable != "" {
		return &push.Hints{Publisher: push.NewTableFromAWS(awsCfg, cfg.PushHintTable, cfg.DynamoDBEndpoint), Logger: log}, nil
	}
	iot, err := push.NewIoT(cfg.PushEndpoint, awsCfg)
	if err != nil {
		return nil, err
	}
	return &push.Hints{Publisher: iot, Logger: log}, nil
}
