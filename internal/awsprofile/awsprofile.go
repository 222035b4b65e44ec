// Package awsprofile loads the AWS SDK's configuration with its whole
// credential chain (environment, shared files and profiles, SSO, the
// instance metadata service), for the programs people run (pendingctl,
// the dev server), with the same bounds as the functions' (awsenv).
package awsprofile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/awslog"
)

// Load loads the default configuration, the SDK logging through log
// (nil: slog.Default()). It fails when no region is configured.
func Load(ctx context.Context, log *slog.Logger) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithHTTPClient(awsenv.HTTPClient()),
		config.WithRetryer(awsenv.Retryer),
		config.WithLogger(awslog.SDKLogger(log)),
	)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("load aws config: no region (set AWS_REGION)")
	}
	return cfg, nil
}
