package s3blobs

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Errors of CheckBucket, each wrapped with S3's own error.
var (
	// ErrNoSuchBucket: S3 answered that the bucket does not exist.
	ErrNoSuchBucket = errors.New("s3blobs: no such bucket")
	// ErrAccessDenied: S3 refused these credentials the bucket.
	ErrAccessDenied = errors.New("s3blobs: access to the bucket denied")
	// ErrUnreachable: S3 did not answer at all (connection refused, no
	// such host, a timeout), after the client's retries.
	ErrUnreachable = errors.New("s3blobs: S3 does not answer")
)

// BucketHeader is the one call CheckBucket makes. *s3.Client implements it.
type BucketHeader interface {
	HeadBucket(ctx context.Context, in *s3.HeadBucketInput, optFns ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
}

var _ BucketHeader = (*s3.Client)(nil)

// CheckBucket asks S3 once (HeadBucket) whether bucket exists and the
// client's credentials may use it: what a program checks at start, so
// that a wrong setting is named then rather than at the first large
// upload. It returns nil, or an error wrapping ErrNoSuchBucket,
// ErrAccessDenied or ErrUnreachable, or any other failure as it came.
func CheckBucket(ctx context.Context, api BucketHeader, bucket string) error {
	_, err := api.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if err == nil {
		return nil
	}
	var resp *smithyhttp.ResponseError
	var send *smithyhttp.RequestSendError
	switch {
	case errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusNotFound:
		return fmt.Errorf("bucket %s: %w: %w", bucket, ErrNoSuchBucket, err)
	case errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusForbidden:
		return fmt.Errorf("bucket %s: %w: %w", bucket, ErrAccessDenied, err)
	case errors.As(err, &send) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("bucket %s: %w: %w", bucket, ErrUnreachable, err)
	}
	return fmt.Errorf("bucket %s: %w", bucket, err)
}

// NewClient returns the S3 client NewFromAWS builds a Store on: awsCfg,
// with endpoint (when not empty) in place of S3's, and the bucket in the
// path instead of the host name when forcePathStyle is set.
func NewClient(awsCfg aws.Config, endpoint string, forcePathStyle bool) *s3.Client {
	return s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = forcePathStyle
	})
}
