package s3blobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// countingAPI passes every call to the real S3 and counts DeleteObjects
// requests and the keys in each.
type countingAPI struct {
	s3blobs.S3API
	mu      sync.Mutex
	batches []int
}

func (c *countingAPI) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	c.mu.Lock()
	c.batches = append(c.batches, len(in.Delete.Objects))
	c.mu.Unlock()
	return c.S3API.DeleteObjects(ctx, in, optFns...)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	_, c := newStore(t)
	api := &countingAPI{S3API: c.Client}
	st := s3blobs.New(api, nil, c.Bucket)
	ctx := context.Background()

	// One key past a full batch: S3's most (MaxDeleteBatch) in one
	// request, and the one left over in a second.
	t.Run("TwoBatches", func(t *testing.T) {
		keys := make([]string, s3blobs.MaxDeleteBatch+1)
		for i := range keys {
			keys[i] = fmt.Sprintf("objects/ws/%04d", i)
		}
		putAll(t, st, keys)
		if n := countObjects(t, c, "objects/ws/"); n != len(keys) {
			t.Fatalf("before Delete: got %d objects, want %d", n, len(keys))
		}
		if err := st.Delete(ctx, keys); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if got, want := fmt.Sprint(api.batches), "[1000 1]"; got != want {
			t.Errorf("DeleteObjects batches: got %s, want %s", got, want)
		}
		if n := countObjects(t, c, "objects/ws/"); n != 0 {
			t.Errorf("after Delete: got %d objects, want 0", n)
		}
		if _, err := c.Size(ctx, keys[len(keys)-1]); !errors.Is(err, s3test.ErrNoObject) {
			t.Errorf("Size of a deleted key: got %v, want ErrNoObject", err)
		}
	})

	t.Run("AbsentKeys", func(t *testing.T) {
		if err := st.Delete(ctx, []string{"objects/never/1", "objects/never/2"}); err != nil {
			t.Errorf("Delete of absent keys: got %v, want nil", err)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		api.mu.Lock()
		before := len(api.batches)
		api.mu.Unlock()
		if err := st.Delete(ctx, nil); err != nil {
			t.Errorf("Delete(nil): got %v, want nil", err)
		}
		if len(api.batches) != before {
			t.Errorf("Delete(nil) sent %d requests, want 0", len(api.batches)-before)
		}
	})
}

// putAll puts a small object under each key, 16 at a time.
func putAll(tb testing.TB, st *s3blobs.Store, keys []string) {
	tb.Helper()
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	sem := make(chan struct{}, 16)
	for _, k := range keys {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := st.Put(context.Background(), k, []byte(k), "text/plain"); err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		tb.Fatalf("Put: %v", *err)
	}
}

func countObjects(tb testing.TB, c *s3test.Objects, prefix string) int {
	tb.Helper()
	n := 0
	pages := s3.NewListObjectsV2Paginator(c.Client, &s3.ListObjectsV2Input{Bucket: aws.String(c.Bucket), Prefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			tb.Fatalf("list %s: %v", prefix, err)
		}
		n += len(page.Contents)
	}
	return n
}

// refusingAPI answers DeleteObjects with a per-key error for every key in
// refuse, or fails the whole request with err: faults S3 (and moto) cannot
// produce on demand.
type refusingAPI struct {
	s3blobs.S3API // nil: any other call panics
	refuse        map[string]bool
	err           error
	calls         int
}

func (f *refusingAPI) DeleteObjects(_ context.Context, in *s3.DeleteObjectsInput, _ ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if !aws.ToBool(in.Delete.Quiet) {
		return nil, errors.New("refusingAPI: want Quiet")
	}
	out := &s3.DeleteObjectsOutput{}
	for _, o := range in.Delete.Objects {
		if f.refuse[aws.ToString(o.Key)] {
			out.Errors = append(out.Errors, types.Error{Key: o.Key, Code: aws.String("AccessDenied"), Message: aws.String("Access Denied")})
		}
	}
	return out, nil
}

func TestDeleteFaults(t *testing.T) {
	t.Parallel()
	keys := make([]string, 1500)
	for i := range keys {
		keys[i] = fmt.Sprintf("objects/ws/%04d", i)
	}

	t.Run("DeleteError", func(t *testing.T) {
		api := &refusingAPI{refuse: map[string]bool{keys[7]: true, keys[8]: true}}
		err := s3blobs.New(api, nil, "b").Delete(context.Background(), keys)
		var de *s3blobs.DeleteError
		if !errors.As(err, &de) {
			t.Fatalf("Delete: got %v, want a *DeleteError", err)
		}
		if de.Key != keys[7] || de.Code != "AccessDenied" {
			t.Errorf("DeleteError: got key %q code %q, want %q AccessDenied", de.Key, de.Code, keys[7])
		}
		for _, want := range []string{keys[7], "AccessDenied", "2 refused"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q: want it to name %q", err, want)
			}
		}
		if api.calls != 2 {
			t.Errorf("DeleteObjects calls: got %d, want 2 (later batches still sent)", api.calls)
		}
	})

	t.Run("RequestFailed", func(t *testing.T) {
		boom := errors.New("connection reset")
		api := &refusingAPI{err: boom}
		err := s3blobs.New(api, nil, "b").Delete(context.Background(), keys)
		if !errors.Is(err, boom) {
			t.Errorf("Delete: got %v, want it to wrap %v", err, boom)
		}
		if api.calls != 1 {
			t.Errorf("DeleteObjects calls: got %d, want 1 (stop at a failed request)", api.calls)
		}
	})
}
