package pendinguploads

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestTurnsOneAtATime: a workspace's calls in one process take turns, a
// second waiting (in memory) until the first releases, while another
// workspace's call goes at once; a wait past its bound, or past its
// call's end, is ErrWorkspaceBusy; and the map keeps no workspace no
// call is in.
func TestTurnsOneAtATime(t *testing.T) {
	var tt turns
	a, b := uuid.New(), uuid.New()
	ctx := context.Background()
	releaseA, err := tt.take(ctx, a, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var releaseA2 func()
	go func() {
		var err error
		releaseA2, err = tt.take(ctx, a, 10*time.Second)
		got <- err
	}()
	// The second call of a waits; b's goes at once.
	for tt.waiting(a) != 2 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-got:
		t.Fatalf("a second call of the workspace took its turn while the first held it: %v", err)
	default:
	}
	releaseB, err := tt.take(ctx, b, time.Second)
	if err != nil {
		t.Fatalf("another workspace waited: %v", err)
	}
	releaseB()
	releaseA()
	if err := <-got; err != nil {
		t.Fatalf("the second call, after the first released: %v", err)
	}

	t.Run("ErrWorkspaceBusy", func(t *testing.T) {
		if _, err := tt.take(ctx, a, 20*time.Millisecond); !errors.Is(err, ErrWorkspaceBusy) {
			t.Errorf("a wait past its bound: got %v, want ErrWorkspaceBusy", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := tt.take(cctx, a, time.Minute); !errors.Is(err, ErrWorkspaceBusy) || !errors.Is(err, context.Canceled) {
			t.Errorf("a call that ended: got %v, want ErrWorkspaceBusy and context.Canceled", err)
		}
	})
	releaseA2()
	tt.mu.Lock()
	n := len(tt.m)
	tt.mu.Unlock()
	if n != 0 {
		t.Errorf("workspaces kept with no call in them: %d", n)
	}
}
