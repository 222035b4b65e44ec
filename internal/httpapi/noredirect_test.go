package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/apptest"
)

// TestClientThatNeverFollowsRedirects acts as the platform's workspace
// runtime does: it never follows a redirect and takes any status below 400
// as the file. Every file, inline or in the bucket, up to a 100 MiB one
// (MAX_FILE_BYTES raised), comes back byte-exact: no 307 with an empty
// body is ever written to disk as the file.
func TestClientThatNeverFollowsRedirects(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"MAX_FILE_BYTES": "104857600"}})
	runtime := &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       2 * time.Minute,
	}
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	for _, size := range []int{1000, 3 << 20, 25 << 20, 100 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			data := randomBytes(size)
			rec, err := srv.Store.Put(context.Background(), ws, data, fmt.Sprintf("f%d.bin", size), "")
			if err != nil {
				t.Fatal(err)
			}
			if inBucket := rec.S3Key != ""; inBucket != (size > 256<<10) {
				t.Fatalf("held in the bucket: %v, for %d bytes", inBucket, size)
			}
			req := newRequest(t, "GET", contentURL(srv, ws.String(), rec.FileID.String()), tok, "", nil)
			resp, err := runtime.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode >= 400 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("status %d: the runtime would store %d bytes, want the file's %d", resp.StatusCode, len(got), size)
			}
		})
	}
}
