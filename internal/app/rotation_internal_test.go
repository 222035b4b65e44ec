package app

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRefreshHonoursDeadline: a connect whose password was refused, while
// another connect re-reads the secret, waits no longer than its own
// context for that re-read: it returns the context's error, not whenever
// the other re-read ends.
func TestRefreshHonoursDeadline(t *testing.T) {
	p := newDBPassword(nil, "arn:aws:secretsmanager:us-east-1:123456789012:secret:db", "refused-password")
	if err := p.rereading.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	defer p.rereading.Release(1) // another connect's re-read, never ending here
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := p.refresh(ctx, "refused-password")
		done <- result{ok, err}
	}()
	select {
	case r := <-done:
		if r.ok || !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("got %v, %v; want false, context.DeadlineExceeded", r.ok, r.err)
		}
	case <-time.After(time.Minute): // a hang guard, far past the deadline: not a measure
		t.Fatal("still waiting for the secret's re-read a minute after the connect's deadline")
	}
}
