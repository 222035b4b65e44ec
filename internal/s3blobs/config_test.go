package s3blobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
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

// newFromEnv is a Store as a function opens it: awsenv's configuration.
func newFromEnv(t *testing.T, bucket, endpoint string, log *slog.Logger) (*s3blobs.Store, error) {
	t.Helper()
	awsCfg, err := awsenv.Load(os.Getenv, log)
	if err != nil {
		return nil, err
	}
	return s3blobs.NewFromAWS(awsCfg, bucket, endpoint, true)
}

// readAll reads the n bytes of key through st.
func readAll(ctx context.Context, st *s3blobs.Store, key string, n int64) ([]byte, error) {
	r, err := st.Open(ctx, key, 0, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Not parallel: these tests set the process environment.
func TestNewFromAWS(t *testing.T) {
	ep := s3test.MustStart(t)
	_, bucket := s3test.NewBucket(t, ep)
	ctx := context.Background()

	t.Run("LocalEndpoint", func(t *testing.T) {
		isolate(t, ep.Env())
		st, err := newFromEnv(t, bucket, ep.URL, nil)
		if err != nil {
			t.Fatalf("NewFromAWS: %v", err)
		}
		if err := st.Put(ctx, "objects/cfg", []byte{0xde, 0xad}, "application/octet-stream"); err != nil {
			t.Fatalf("Put: %v", err)
		}
		if got, err := readAll(ctx, st, "objects/cfg", 2); err != nil || !bytes.Equal(got, []byte{0xde, 0xad}) {
			t.Errorf("Open: got %x, %v, want dead, nil", got, err)
		}
	})

	t.Run("NoRegion", func(t *testing.T) {
		isolate(t, append(ep.Env(), "AWS_REGION="))
		if _, err := newFromEnv(t, bucket, ep.URL, nil); err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
			t.Errorf("got %v, want an error naming AWS_REGION", err)
		}
	})

	t.Run("NoCredentials", func(t *testing.T) {
		isolate(t, append(ep.Env(), "AWS_ACCESS_KEY_ID="))
		if _, err := newFromEnv(t, bucket, ep.URL, nil); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
			t.Errorf("got %v, want an error naming AWS_ACCESS_KEY_ID", err)
		}
	})

	t.Run("NoBucket", func(t *testing.T) {
		isolate(t, ep.Env())
		if _, err := newFromEnv(t, "", ep.URL, nil); err == nil {
			t.Error("NewFromAWS with no bucket: got nil error, want one")
		}
	})
}

// TestSDKLogsAreJSON: what the SDK logs goes through the service's slog
// logger as JSON lines, and nothing reaches stderr in the SDK's plain
// text. A GET of an object stored without a checksum makes the SDK log
// (at DEBUG) that it cannot validate the payload.
func TestSDKLogsAreJSON(t *testing.T) {
	ep := s3test.MustStart(t)
	client, bucket := s3test.NewBucket(t, ep)
	isolate(t, ep.Env())
	ctx := context.Background()

	// The SDK's default logger writes to the os.Stderr of its making.
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = stderr
	defer func() { os.Stderr = saved }()

	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := newFromEnv(t, bucket, ep.URL, log)
	if err != nil {
		t.Fatalf("NewFromAWS: %v", err)
	}
	// A plain PUT, without the SDK's checksum, as a presigned upload is.
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("objects/plain"), Body: strings.NewReader("plain")},
		func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired }); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, _, err := st.Digest(ctx, "objects/plain"); err != nil {
		t.Fatalf("Digest: %v", err)
	}
	os.Stderr = saved

	out, _ := os.ReadFile(stderr.Name())
	if len(out) != 0 {
		t.Errorf("stderr: got %q, want nothing (the SDK's lines go through slog)", out)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	sdk := 0
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line %q is not JSON: %v", line, err)
			continue
		}
		if rec["source"] == "aws-sdk" {
			sdk++
		}
	}
	if sdk == 0 {
		t.Fatalf("no SDK line captured (log %q): the test proves nothing", logs.String())
	}
}
