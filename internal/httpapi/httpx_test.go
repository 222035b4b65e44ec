package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// python is the interpreter of the httpx test: Debian's, where
// python3-httpx installs (scripts/ensure-tools.sh).
const python = "/usr/bin/python3"

// TestHTTPXRuntimeGetsTheBytes fetches content with Python httpx the way
// the platform's workspace runtime does: it never follows a redirect and
// takes any status below 400 as the file. Every file, inline, in the
// bucket, of the largest size, acked but not yet swept, must come back as
// a 200 whose body written to disk is the file, byte for byte, with the
// Content-Length and Content-Digest of the whole file. (A 307 to S3 would
// leave it an empty file: the loss this guards against.) A larger size
// is one more row.
func TestHTTPXRuntimeGetsTheBytes(t *testing.T) {
	t.Parallel()
	if err := exec.Command(python, "-c", "import httpx").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s cannot import httpx (%v): apt-get install python3-httpx (CI is set, so this is a failure)", python, err)
		}
		t.Skipf("%s cannot import httpx (apt-get install python3-httpx)", python)
	}
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"MAX_FILE_BYTES": "104857600"}})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		size   int
		bucket bool
		acked  bool
	}{
		{"inline", 100 << 10, false, false},
		{"inline acked", 200 << 10, false, true},
		{"bucket", 3<<20 + 1, true, false},
		{"bucket acked", 5 << 20, true, true},
		{"bucket 25 MiB", 25 << 20, true, false},
		{"bucket 100 MiB", 100 << 20, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randomBytes(tc.size)
			rec, err := stageOne(srv, ws, data, "runtime.bin", "application/octet-stream")
			if err != nil {
				t.Fatal(err)
			}
			if rec.InBucket() != tc.bucket {
				t.Fatalf("staged in the bucket: %v, want %v", rec.InBucket(), tc.bucket)
			}
			if tc.acked {
				if _, err := srv.Store.Ack(ctx, auth.AdminIdentity(), ws, rec.FileID); err != nil {
					t.Fatal(err)
				}
			}
			out := filepath.Join(t.TempDir(), "runtime.bin")
			cmd := exec.CommandContext(ctx, python, "testdata/httpx_fetch.py",
				contentURL(srv, ws.String(), rec.FileID.String()), tok, out)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.Output()
			if err != nil {
				t.Fatalf("httpx: %v\n%s", err, stderr.Bytes())
			}
			var got struct {
				Status  int               `json:"status"`
				Written int               `json:"written"`
				SHA256  string            `json:"sha256"`
				Headers map[string]string `json:"headers"`
			}
			if err := json.Unmarshal(stdout, &got); err != nil {
				t.Fatalf("httpx printed %q: %v", stdout, err)
			}
			sum := sha256.Sum256(data)
			if got.Status != 200 || got.Written != tc.size || got.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("httpx: status %d, wrote %d bytes of SHA-256 %s; want 200 and the %d bytes of %x",
					got.Status, got.Written, got.SHA256, tc.size, sum)
			}
			if onDisk, err := os.ReadFile(out); err != nil || !bytes.Equal(onDisk, data) {
				t.Fatalf("the file on disk is not the upload (%d bytes, %v)", len(onDisk), err)
			}
			for name, want := range map[string]string{
				"content-length": strconv.Itoa(tc.size),
				"content-digest": "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
				"content-type":   "application/octet-stream",
			} {
				if got.Headers[name] != want {
					t.Errorf("%s: got %q, want %q", name, got.Headers[name], want)
				}
			}
		})
	}
}
