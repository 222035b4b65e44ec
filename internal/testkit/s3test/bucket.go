package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// NewClient returns an S3 client for ep: region Region, the dummy static
// credentials, path-style addressing, and no configuration read from the
// environment or shared files.
func NewClient(ep Endpoint) *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint: aws.String(ep.URL),
		UsePathStyle: true,
	})
}

// NewBucket creates a bucket with a fresh unique name on ep and returns a
// client for it (see NewClient) and the name. The bucket and its objects
// are deleted when the test ends; a failure to delete them is logged.
func NewBucket(tb testing.TB, ep Endpoint) (*s3.Client, string) {
	tb.Helper()
	client := NewClient(ep)
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("s3test: bucket name: %v", err)
	}
	bucket := "s3test-" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		tb.Fatalf("s3test: create bucket %s: %v", bucket, err)
	}
	tb.Cleanup(func() {
		if err := emptyAndDelete(client, bucket); err != nil {
			tb.Logf("s3test: delete bucket %s: %v", bucket, err)
		}
	})
	return client, bucket
}

func emptyAndDelete(client *s3.Client, bucket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		if len(page.Contents) == 0 {
			continue
		}
		objs := make([]types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			objs[i] = types.ObjectIdentifier{Key: o.Key}
		}
		out, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(bucket),
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("delete objects: %w", err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("delete %s: %s", aws.ToString(e.Key), aws.ToString(e.Code))
		}
	}
	_, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	return err
}
