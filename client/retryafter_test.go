package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
)

// comingBack is an API that answers its first unavailable requests 503
// with Retry-After (retryAfter, "" for none), as the service does while
// its database resumes from a pause, and then a list's 200; it counts the
// requests.
func comingBack(t *testing.T, unavailable int32, retryAfter string) (*client.Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= unavailable {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"storage unavailable, retry shortly","code":"unavailable"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"uploads":[]}`))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// TestRetryAfterWaitedOut: a call that retries is tried again past
// MaxAttempts while the server's 503s carry Retry-After, within
// RetryAfterBudget, so that a database resuming from its pause is waited
// out; without Retry-After, MaxAttempts bounds it as before; MaxAttempts
// 1 still disables retries, and a multipart upload is never retried.
func TestRetryAfterWaitedOut(t *testing.T) {
	t.Parallel()
	t.Run("PastMaxAttempts", func(t *testing.T) {
		t.Parallel()
		unavailable := int32(client.DefaultRetry.MaxAttempts)
		c, calls := comingBack(t, unavailable, "1")
		if _, err := c.List(testCtx(t), uuid.New()); err != nil || calls.Load() != unavailable+1 {
			t.Fatalf("got %v after %d calls, want success after %d", err, calls.Load(), unavailable+1)
		}
	})
	t.Run("BudgetSpent", func(t *testing.T) {
		t.Parallel()
		c, calls := comingBack(t, 1000, "1")
		// Waits of 1 s: a third would pass the budget.
		c.Retry = client.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, RetryAfterBudget: 2500 * time.Millisecond}
		if _, err := c.List(testCtx(t), uuid.New()); !client.IsUnavailable(err) || calls.Load() != 3 {
			t.Fatalf("got %v after %d calls, want 503 after 3", err, calls.Load())
		}
	})
	t.Run("WithoutRetryAfter", func(t *testing.T) {
		t.Parallel()
		c, calls := comingBack(t, 1000, "")
		if _, err := c.List(testCtx(t), uuid.New()); !client.IsUnavailable(err) || calls.Load() != int32(client.DefaultRetry.MaxAttempts) {
			t.Fatalf("got %v after %d calls, want 503 after %d", err, calls.Load(), client.DefaultRetry.MaxAttempts)
		}
	})
	t.Run("OneAttemptDisablesRetries", func(t *testing.T) {
		t.Parallel()
		c, calls := comingBack(t, 1000, "1")
		c.Retry = client.RetryPolicy{MaxAttempts: 1}
		if _, err := c.List(testCtx(t), uuid.New()); !client.IsUnavailable(err) || calls.Load() != 1 {
			t.Fatalf("got %v after %d calls, want 503 after 1", err, calls.Load())
		}
	})
	t.Run("UploadNotRetried", func(t *testing.T) {
		t.Parallel()
		c, calls := comingBack(t, 1000, "1")
		if _, err := c.UploadMultipart(testCtx(t), uuid.New(), []client.UploadFile{client.BytesFile("a.txt", "", []byte("x"))}); !client.IsUnavailable(err) || calls.Load() != 1 {
			t.Fatalf("got %v after %d calls, want 503 after 1", err, calls.Load())
		}
	})
}
