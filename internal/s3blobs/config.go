package s3blobs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	// HTTPTimeout bounds one HTTP attempt of a Store built by
	// NewFromConfig, from dial to the last byte of the body (25 MiB).
	HTTPTimeout = 30 * time.Second
	// DialTimeout bounds connecting to S3.
	DialTimeout = 5 * time.Second
	// RetryMaxAttempts is how many attempts, first included, the SDK's
	// standard retryer makes for one call.
	RetryMaxAttempts = 3
)

// NewFromConfig returns a Store over bucket with clients built from the
// default AWS configuration (environment, shared files, the Lambda role).
// A non-empty endpoint replaces S3's (a local S3 such as moto or MinIO);
// forcePathStyle puts the bucket in the path instead of the host name.
//
// Each call is retried by the SDK's standard retryer, at most
// RetryMaxAttempts attempts of at most HTTPTimeout each. It returns an
// error when bucket is empty, the configuration cannot be loaded, or no
// region is configured (AWS_REGION).
func NewFromConfig(ctx context.Context, bucket, endpoint string, forcePathStyle bool) (*Store, error) {
	if bucket == "" {
		return nil, errors.New("s3blobs: empty bucket name")
	}
	httpClient := awshttp.NewBuildableClient().
		WithTimeout(HTTPTimeout).
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = DialTimeout })
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithHTTPClient(httpClient),
		config.WithRetryMode(aws.RetryModeStandard),
		config.WithRetryMaxAttempts(RetryMaxAttempts),
	)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("load aws config: no region (set AWS_REGION)")
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = forcePathStyle
	})
	return NewFromClient(client, bucket), nil
}
