package app

import (
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/push"
)

// hints is the store's Notifier: upload hints through AWS IoT Core's
// Publish when PUSH_ENDPOINT is set (nil otherwise; the dev server sets
// its local broker's).
func hints(cfg config.Config, awsConfig func() (aws.Config, error), log *slog.Logger) (pendinguploads.Notifier, error) {
	if cfg.PushEndpoint == "" {
		return nil, nil
	}
	awsCfg, err := awsConfig()
	if err != nil {
		return nil, err
	}
	iot, err := push.NewIoT(cfg.PushEndpoint, awsCfg)
	if err != nil {
		return nil, err
	}
	return &push.Hints{Publisher: iot, Logger: log}, nil
}
