package s3test_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// TestIAMProxy: the proxy judges each call by its signer's policy, as
// AWS does: an action outside the granted prefix is 403 and never
// reaches the bucket; DeleteObjects deletes the allowed keys and reports
// the others AccessDenied; a missing key is 404 only with s3:ListBucket;
// a ListBucket condition on s3:prefix is held; a principal without a
// policy (the test's own) may do anything.
func TestIAMProxy(t *testing.T) {
	ep := s3test.MustStart(t)
	admin, bucket := s3test.NewBucket(t, ep)
	arn := "arn:aws:s3:::" + bucket
	proxy := s3test.StartIAMProxy(t, ep, map[string]s3test.Policy{
		"AKIALIMITED": {{Actions: []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, Resources: []string{arn + "/objects/*"}}},
		"AKIALISTER": {
			{Actions: []string{"s3:GetObject"}, Resources: []string{arn + "/objects/*"}},
			{Actions: []string{"s3:ListBucket"}, Resources: []string{arn}, PrefixLike: []string{"objects/*"}},
		},
		"AKIAFULLLIST": {
			{Actions: []string{"s3:GetObject"}, Resources: []string{arn + "/objects/*"}},
			{Actions: []string{"s3:ListBucket"}, Resources: []string{arn}},
		},
	})
	as := func(key string) *s3.Client {
		return s3.New(s3.Options{Region: s3test.Region, BaseEndpoint: aws.String(proxy.URL), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(key, s3test.SecretAccessKey, "")})
	}
	ctx := context.Background()
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}
	put := func(c *s3.Client, key string) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("x")})
		return err
	}
	limited := as("AKIALIMITED")
	if err := put(limited, "objects/a"); err != nil {
		t.Fatalf("put under objects/: %v", err)
	}
	if err := put(limited, "staging/a"); code(err) != "AccessDenied" {
		t.Fatalf("put under staging/: got %v, want AccessDenied", err)
	}
	if _, err := admin.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("staging/a")}); err == nil {
		t.Fatal("a denied put reached the bucket")
	}
	if err := put(admin, "staging/b"); err != nil {
		t.Fatal(err)
	}
	out, err := limited.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("objects/a")}, {Key: aws.String("staging/b")}}}})
	if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "staging/b" || aws.ToString(out.Errors[0].Code) != "AccessDenied" {
		t.Fatalf("DeleteObjects: got %+v, %v; want staging/b AccessDenied", out, err)
	}
	if _, err := admin.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("objects/a")}); err == nil {
		t.Error("DeleteObjects: the allowed key is still there")
	}
	for key, want := range map[string]string{"AKIALIMITED": "AccessDenied", "AKIALISTER": "AccessDenied", "AKIAFULLLIST": "NoSuchKey"} {
		_, err := as(key).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("objects/missing")})
		if code(err) != want {
			t.Errorf("%s: GET of a missing key: got %v, want %s", key, err, want)
		}
	}
	if _, err := as("AKIALISTER").ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("objects/")}); err != nil {
		t.Errorf("list with the granted prefix: %v", err)
	}
	if _, err := as("AKIALISTER").ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("staging/")}); code(err) != "AccessDenied" {
		t.Errorf("list with another prefix: got %v, want AccessDenied", err)
	}
	// The put, the one key of DeleteObjects, the list (a missing key's
	// 403 is S3 hiding a 404, not a denial of the call).
	if n := len(proxy.Denied()); n != 3 {
		t.Errorf("denials recorded: %d (%v), want 3", n, proxy.Denied())
	}
}
