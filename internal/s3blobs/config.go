package s3blobs

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"

	pconfig "github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// NewFromAWS returns a Store over bucket with a client built from awsCfg
// (awsenv in a function, awsprofile in a program people run: its HTTP
// client and retryer bound every call, the caller's context the whole,
// body included). A non-empty endpoint replaces S3's (a local S3 such as
// moto or MinIO); forcePathStyle puts the bucket in the path instead of
// the host name. It returns an error when bucket is empty.
func NewFromAWS(awsCfg aws.Config, bucket, endpoint string, forcePathStyle bool) (*Store, error) {
	if bucket == "" {
		return nil, errors.New("s3blobs: empty bucket name")
	}
	return NewFromClient(NewClient(awsCfg, endpoint, forcePathStyle), bucket), nil
}

// OpenBucket is the store's bucket as cfg describes it (CONTENT_BUCKET,
// S3_ENDPOINT, S3_FORCE_PATH_STYLE), taking objects up to MAX_FILE_BYTES:
// the app.BucketOpener of the functions that read or write objects.
func OpenBucket(cfg pconfig.Config, awsCfg aws.Config) (pendinguploads.Bucket, error) {
	b, err := NewFromAWS(awsCfg, cfg.ContentBucket, cfg.S3Endpoint, cfg.S3ForcePathStyle)
	if err != nil {
		return nil, err
	}
	if cfg.MaxFileBytes > 0 {
		b.MaxSize = cfg.MaxFileBytes
	}
	return b, nil
}
