package s3test

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// ErrNoObject is returned (wrapped) by Objects' Get and Size when the key
// is absent.
var ErrNoObject = errors.New("s3test: no such object")

// Objects reads one bucket through the AWS SDK alone, around the code
// under test: what a test checks there (the bytes stored, their size, a
// key gone) does not go through that code. It is safe for concurrent use.
type Objects struct {
	Client *s3.Client
	Bucket string
}

// Get returns the whole object under key, or an error wrapping
// ErrNoObject when the key is absent.
func (o *Objects) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := o.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(o.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, noObject("get", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("s3test: get %s: %w", key, err)
	}
	return b, nil
}

// Size returns the size of the object under key from a HEAD, or an error
// wrapping ErrNoObject when the key is absent.
func (o *Objects) Size(ctx context.Context, key string) (int64, error) {
	out, err := o.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(o.Bucket), Key: aws.String(key)})
	if err != nil {
		return 0, noObject("size", key, err)
	}
	if out.ContentLength == nil {
		return 0, fmt.Errorf("s3test: size %s: no Content-Length", key)
	}
	return *out.ContentLength, nil
}

// noObject wraps err, with ErrNoObject too when it says the key is absent:
// NoSuchKey from a GET, NotFound from a HEAD.
func noObject(op, key string, err error) error {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return fmt.Errorf("s3test: %s %s: %w (%w)", op, key, ErrNoObject, err)
	}
	return fmt.Errorf("s3test: %s %s: %w", op, key, err)
}
