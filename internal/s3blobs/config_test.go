package s3blobs_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/s3test"
)

// isolate points the SDK's shared config and credentials files at nothing
// and sets env (KEY=value entries), as a child process would see them.
func isolate(t *testing.T, env []string) {
	missing := filepath.Join(t.TempDir(), "missing")
	t.Setenv("AWS_CONFIG_FILE", missing)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", missing)
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Not parallel: these tests set the process environment.
func TestNewFromConfig(t *testing.T) {
	ep := s3test.MustStart(t)
	_, bucket := s3test.NewBucket(t, ep)
	ctx := context.Background()

	t.Run("LocalEndpoint", func(t *testing.T) {
		isolate(t, ep.Env())
		st, err := s3blobs.NewFromConfig(ctx, bucket, ep.URL, true)
		if err != nil {
			t.Fatalf("NewFromConfig: %v", err)
		}
		if err := st.Put(ctx, "objects/cfg", []byte{0xde, 0xad}, "application/octet-stream"); err != nil {
			t.Fatalf("Put: %v", err)
		}
		if got, err := st.Get(ctx, "objects/cfg"); err != nil || !bytes.Equal(got, []byte{0xde, 0xad}) {
			t.Errorf("Get: got %x, %v, want dead, nil", got, err)
		}
	})

	t.Run("NoRegion", func(t *testing.T) {
		isolate(t, append(ep.Env(), "AWS_REGION="))
		if _, err := s3blobs.NewFromConfig(ctx, bucket, ep.URL, true); err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
			t.Errorf("NewFromConfig: got %v, want an error naming AWS_REGION", err)
		}
	})

	t.Run("NoBucket", func(t *testing.T) {
		isolate(t, ep.Env())
		if _, err := s3blobs.NewFromConfig(ctx, "", ep.URL, true); err == nil {
			t.Error("NewFromConfig with no bucket: got nil error, want one")
		}
	})
}
