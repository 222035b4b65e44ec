package s3blobs_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

func TestCheckBucket(t *testing.T) {
	ep := s3test.MustStart(t)
	awsCfg := aws.Config{
		Region:      s3test.Region,
		Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKeyID, s3test.SecretAccessKey, ""),
		HTTPClient:  awsenv.HTTPClient(),
		Retryer:     awsenv.Retryer,
	}
	check := func(endpoint, bucket string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return s3blobs.CheckBucket(ctx, s3blobs.NewClient(awsCfg, endpoint, true), bucket)
	}
	_, bucket := s3test.NewBucket(t, ep)
	t.Run("Exists", func(t *testing.T) {
		if err := check(ep.URL, bucket); err != nil {
			t.Fatalf("got %v, want nil", err)
		}
	})
	t.Run("ErrNoSuchBucket", func(t *testing.T) {
		if err := check(ep.URL, "no-such-bucket"); !errors.Is(err, s3blobs.ErrNoSuchBucket) {
			t.Fatalf("got %v, want ErrNoSuchBucket", err)
		}
	})
	t.Run("ErrAccessDenied", func(t *testing.T) {
		// An endpoint that refuses everything, as S3 does a bucket of
		// another account.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusForbidden)
		}))
		defer srv.Close()
		if err := check(srv.URL, bucket); !errors.Is(err, s3blobs.ErrAccessDenied) {
			t.Fatalf("got %v, want ErrAccessDenied", err)
		}
	})
	t.Run("ErrUnreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + l.Addr().String()
		l.Close()
		if err := check(closed, bucket); !errors.Is(err, s3blobs.ErrUnreachable) {
			t.Fatalf("got %v, want ErrUnreachable", err)
		}
	})
}
