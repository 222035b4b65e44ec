package pendinguploads

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// turns is the process's side of a workspace's turn: the calls of this
// process that count and store for one workspace (under a quota) go one at
// a time, the others waiting here, in memory, holding no pooled
// connection and no CPU, for at most a bounded time. The database's
// advisory lock (tryLocked) still orders them against other processes;
// here it is then taken by one call of each process at most, so a burst
// into one workspace leaves the pool's connections to other workspaces
// (a Lambda process serves one call at a time: there it never waits).
// Safe for concurrent use; its map holds only the workspaces with a call
// in it, so it is bounded by the calls in flight. The zero value is
// ready.
type turns struct {
	mu sync.Mutex
	m  map[uuid.UUID]*turn
}

// turn is one workspace's: ch holds a token while a call has the turn;
// refs counts the calls that hold or wait for it.
type turn struct {
	ch   chan struct{}
	refs int
}

// DefaultTurnWait bounds a call's wait for its workspace's turn in the
// process (Settings.TurnWait): past it, ErrWorkspaceBusy.
const DefaultTurnWait = 3 * time.Second

// take waits for ws's turn, at most wait and never past ctx, and returns
// its release (call it once). It returns ErrWorkspaceBusy when the wait
// ends first.
func (t *turns) take(ctx context.Context, ws uuid.UUID, wait time.Duration) (release func(), err error) {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[uuid.UUID]*turn{}
	}
	w := t.m[ws]
	if w == nil {
		w = &turn{ch: make(chan struct{}, 1)}
		t.m[ws] = w
	}
	w.refs++
	t.mu.Unlock()
	done := func() {
		t.mu.Lock()
		if w.refs--; w.refs == 0 {
			delete(t.m, ws)
		}
		t.mu.Unlock()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case w.ch <- struct{}{}:
		return func() { <-w.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, fmt.Errorf("stage: %w (its turn in this process did not come before the call's end): %w", ErrWorkspaceBusy, ctx.Err())
	case <-timer.C:
		done()
		return nil, fmt.Errorf("stage: %w (its turn in this process did not come within %v)", ErrWorkspaceBusy, wait)
	}
}

// waiting returns how many calls hold or wait for ws's turn (tests).
func (t *turns) waiting(ws uuid.UUID) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.m[ws]; w != nil {
		return w.refs
	}
	return 0
}
