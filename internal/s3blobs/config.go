package s3blobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/awslog"
	pconfig "github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	// DialTimeout bounds connecting to S3. There is no bound on a whole
	// attempt: a streamed download (up to 100 MiB, at the client's pace)
	// may read its body for minutes; the caller's context bounds it.
	DialTimeout = 2 * time.Second
	// ResponseHeaderTimeout bounds the wait for S3's answer once a request
	// is sent: a frozen endpoint ends the attempt here, and the retries fit
	// inside a request's deadline (httpapi.RequestDeadline).
	ResponseHeaderTimeout = 4 * time.Second
	// RetryMaxAttempts is how many attempts, first included, the SDK's
	// standard retryer makes for one call.
	RetryMaxAttempts = 3
	// RetryMaxBackoff caps the wait between two attempts.
	RetryMaxBackoff = time.Second
)

// NewFromConfig returns a Store over bucket with clients built from the
// default AWS configuration (environment, shared files, the Lambda role).
// A non-empty endpoint replaces S3's (a local S3 such as moto or MinIO);
// forcePathStyle puts the bucket in the path instead of the host name.
// The SDK logs through log (see awslog.SDKLogger; nil: slog.Default()).
//
// Each call is retried by the SDK's standard retryer, at most
// RetryMaxAttempts attempts, each waiting at most DialTimeout to connect
// and ResponseHeaderTimeout for an answer, at most RetryMaxBackoff apart;
// the caller's context bounds the whole, body included. It returns an error when bucket
// is empty, the configuration cannot be loaded, or no region is
// configured (AWS_REGION).
func NewFromConfig(ctx context.Context, bucket, endpoint string, forcePathStyle bool, log *slog.Logger) (*Store, error) {
	if bucket == "" {
		return nil, errors.New("s3blobs: empty bucket name")
	}
	httpClient := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = DialTimeout }).
		WithTransportOptions(func(t *http.Transport) { t.ResponseHeaderTimeout = ResponseHeaderTimeout })
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = RetryMaxAttempts
				o.MaxBackoff = RetryMaxBackoff
			})
		}),
		config.WithLogger(awslog.SDKLogger(log)),
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

// OpenBucket is the store's bucket as cfg describes it (CONTENT_BUCKET,
// S3_ENDPOINT, S3_FORCE_PATH_STYLE), taking objects up to MAX_FILE_BYTES:
// the app.BucketOpener of the functions that read or write objects.
func OpenBucket(ctx context.Context, cfg pconfig.Config, log *slog.Logger) (pendinguploads.Bucket, error) {
	b, err := NewFromConfig(ctx, cfg.ContentBucket, cfg.S3Endpoint, cfg.S3ForcePathStyle, log)
	if err != nil {
		return nil, err
	}
	if cfg.MaxFileBytes > 0 {
		b.MaxSize = cfg.MaxFileBytes
	}
	return b, nil
}
