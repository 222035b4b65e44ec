package s3test_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestNewBucket(t *testing.T) {
	ep := s3test.MustStart(t)
	if again := s3test.MustStart(t); again != ep {
		t.Fatalf("second MustStart: got %v, want %v", again, ep)
	}
	client, bucket := s3test.NewBucket(t, ep)
	_, other := s3test.NewBucket(t, ep)
	if bucket == other {
		t.Fatalf("two NewBucket calls gave the same name %q", bucket)
	}
	ctx := context.Background()
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("v"),
	}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("head bucket: %v", err)
	}
}

func TestEndpointEnv(t *testing.T) {
	env := s3test.Endpoint{URL: "http://127.0.0.1:1"}.Env()
	want := map[string]string{
		"AWS_ACCESS_KEY_ID":     "test",
		"AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION":            "us-east-1",
		"S3_ENDPOINT":           "http://127.0.0.1:1",
		"S3_FORCE_PATH_STYLE":   "true",
	}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}
