package watch_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestWatchIdleListsOncePerFallback: a watcher with nothing to pull makes
// one list call as it starts and then one per fallback interval: over 2.5
// s at a 1 s fallback, 3 at most (and at least 2: it does poll). The
// fallback's timer starts when a pull ends, and the window when the first
// one has: a timer never fires early, so the third poll is at 3 s at the
// soonest, and the second has 1.5 s of slack on a loaded machine.
func TestWatchIdleListsOncePerFallback(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const fallback, window = time.Second, 2500 * time.Millisecond
	start := r.lists.Load()
	r.watch(t, t.TempDir(), fallback)
	time.Sleep(window)
	got := r.lists.Load() - start
	t.Logf("idle watcher: %d list calls in %s at a %s fallback", got, window, fallback)
	if maxCalls := 1 + int64(window/fallback); got > maxCalls || got < 2 {
		t.Errorf("list calls of an idle watcher over %s: got %d, want 2..%d (one at start, then one per %s)", window, got, maxCalls, fallback)
	}
}

// TestWatchDeliversOnHints: 20 uploads at random moments each reach the
// pull directory by their hint: the fallback (10 minutes) is far too long
// to have found any, and each hint costs the watcher exactly one list
// call. How soon they arrive (API.md's "within a second": 5-20 ms at the
// median here) is logged, not asserted: a test on a loaded machine is no
// measure of latency (docs/push.md has the measurement).
func TestWatchDeliversOnHints(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dir := t.TempDir()
	r.watch(t, dir, 10*time.Minute)
	lists := r.lists.Load()
	var lat []time.Duration
	for i := range 20 {
		time.Sleep(time.Duration(rand.Int64N(int64(300 * time.Millisecond))))
		name := fmt.Sprintf("file-%02d.txt", i)
		ok200 := r.upload(t, name, []byte(name))
		seen, ok := arrival(t, dir, name, 10*time.Second)
		if !ok {
			t.Fatalf("%s: not in the pull directory 10s after its 200, with no poll due for 10 minutes: its hint did not pull it", name)
		}
		lat = append(lat, seen.Sub(ok200))
	}
	slices.Sort(lat)
	calls := r.lists.Load() - lists
	t.Logf("upload 200 → file in the pull directory, 20 uploads: p50 %s, slowest %s (fastest %s); list calls %d",
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), lat[0].Round(time.Millisecond), calls)
	if calls != 20 {
		t.Errorf("list calls for 20 hinted uploads: got %d, want 20 (one a hint, no poll)", calls)
	}
}

// TestWatchLostHintArrivesWithinFallback: a hint published while the
// broker is down is lost; the file still arrives by the fallback poll
// (at the next one: how long after its 200 is logged, and bounded only
// by two intervals, as a loaded machine may delay one), though the broker
// stays down. When the broker is back on its port, the watcher reconnects
// by itself and the next hint delivers before the fallback could have.
func TestWatchLostHintArrivesWithinFallback(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dir := t.TempDir()
	const fallback = 3 * time.Second
	st := r.watch(t, dir, fallback)

	r.stopBroker()
	ok200 := r.upload(t, "lost.txt", []byte("its hint went nowhere"))
	seen, ok := arrival(t, dir, "lost.txt", 2*fallback)
	if !ok {
		t.Fatalf("a file whose hint was lost: not delivered within two fallback intervals (%s) of its 200", 2*fallback)
	}
	t.Logf("file whose hint was lost, broker down: delivered %s after its 200 (fallback %s)", seen.Sub(ok200).Round(time.Millisecond), fallback)
	if st.count("push:") == 0 || st.count("polling") == 0 {
		t.Errorf("the watcher said it lost the broker %d times and polled %d times; want both", st.count("push:"), st.count("polling"))
	}

	r.startBroker(t, r.addr)
	deadline := time.Now().Add(5 * time.Second)
	for st.count("connected") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not reconnect within 5s of the broker's restart")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the reconnection's own pull
	ok200 = r.upload(t, "after.txt", []byte("hinted again"))
	seen, ok = arrival(t, dir, "after.txt", 5*time.Second)
	// The next poll is due about fallback-200ms after the upload: half
	// of it tells the hint from the poll, with room for a loaded machine.
	if !ok || seen.Sub(ok200) >= fallback/2 {
		t.Errorf("after the broker's restart: delivered %v (%s after its 200), want by its hint, within %s (the next poll is due at about %s)",
			ok, seen.Sub(ok200), fallback/2, fallback-200*time.Millisecond)
	}
}

// TestWatchFallbackListsThroughPollURL: with a poll URL (the list
// function's own door, pendingctl pull --poll-url), an idle watcher's
// list calls all go there, none through the API; a hinted file is still
// fetched and acked through the API.
func TestWatchFallbackListsThroughPollURL(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dir := t.TempDir()
	const fallback = 2 * time.Second
	r.watchListingAt(t, dir, fallback, r.pollURL)
	time.Sleep(fallback + fallback/2)
	ok200 := r.upload(t, "via-poll-url.txt", []byte("x"))
	// Delivered, fetched and acked through the API (a poll would bring it
	// too: what is proven here is where each call goes, not how soon).
	seen, ok := arrival(t, dir, "via-poll-url.txt", 10*time.Second)
	if !ok {
		t.Fatalf("hinted file with a poll URL: not delivered within 10s of its 200")
	}
	t.Logf("hinted file with a poll URL: delivered %s after its 200", seen.Sub(ok200).Round(time.Millisecond))
	if api, poll := r.lists.Load(), r.pollLists.Load(); api != 0 || poll < 3 {
		t.Errorf("list calls: %d through the API, %d through the poll URL; want 0 and at least 3 (start, fallback, hint)", api, poll)
	}
}
