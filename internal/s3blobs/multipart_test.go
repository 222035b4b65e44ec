package s3blobs_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// TestMultipartNoMore: once a multipart upload is completed (or
// aborted), ListParts answers ErrBlobNotFound and AbortMultipart has
// nothing to do: S3 says NoSuchUpload, which the SDK types only for
// AbortMultipartUpload. A commit retried after the assembly (it then
// places the object), and a resume of such an upload (404), rely on it.
// (CompleteMultipart is not asked again here: S3 may answer a repeated
// one with success, and moto answers one of an aborted upload with a
// 500.)
func TestMultipartNoMore(t *testing.T) {
	t.Parallel()
	st, c := newStore(t)
	ctx := context.Background()
	const key = "staging/w/parts"
	part := binary(5 << 20)
	for _, end := range []string{"Completed", "Aborted"} {
		t.Run(end, func(t *testing.T) {
			id, err := st.CreateMultipart(ctx, key, "", false)
			if err != nil {
				t.Fatal(err)
			}
			url, headers, err := st.PresignPart(ctx, key, id, 1, int64(len(part)), nil, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(part))
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("part PUT: %v, %v", res, err)
			}
			parts, err := st.ListParts(ctx, key, id)
			if err != nil || len(parts) != 1 {
				t.Fatalf("list parts: %v, %v", parts, err)
			}
			if end == "Completed" {
				if err := st.CompleteMultipart(ctx, key, id, parts); err != nil {
					t.Fatal(err)
				}
				if got, err := c.Get(ctx, key); err != nil || !bytes.Equal(got, part) {
					t.Fatalf("completed object: %d bytes, %v", len(got), err)
				}
			} else if err := st.AbortMultipart(ctx, key, id); err != nil {
				t.Fatal(err)
			}
			if _, err := st.ListParts(ctx, key, id); !errors.Is(err, pendinguploads.ErrBlobNotFound) {
				t.Errorf("list parts: got %v, want ErrBlobNotFound", err)
			}
			if err := st.AbortMultipart(ctx, key, id); err != nil {
				t.Errorf("abort: got %v, want nothing to do", err)
			}
		})
	}
}
