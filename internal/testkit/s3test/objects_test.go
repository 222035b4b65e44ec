package s3test_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// TestObjects: Get and Size read what the SDK put, and an absent key is
// ErrNoObject for both.
func TestObjects(t *testing.T) {
	client, bucket := s3test.NewBucket(t, s3test.MustStart(t))
	o := &s3test.Objects{Client: client, Bucket: bucket}
	ctx := context.Background()
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("value"),
	}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if got, err := o.Get(ctx, "k"); err != nil || string(got) != "value" {
		t.Errorf("Get: got %q, %v, want value, nil", got, err)
	}
	if n, err := o.Size(ctx, "k"); err != nil || n != 5 {
		t.Errorf("Size: got %d, %v, want 5, nil", n, err)
	}
	t.Run("ErrNoObject", func(t *testing.T) {
		if _, err := o.Get(ctx, "absent"); !errors.Is(err, s3test.ErrNoObject) {
			t.Errorf("Get: got %v, want ErrNoObject", err)
		}
		if _, err := o.Size(ctx, "absent"); !errors.Is(err, s3test.ErrNoObject) {
			t.Errorf("Size: got %v, want ErrNoObject", err)
		}
	})
}
