package s3test

import (
	"context"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"
)

// PartProxy is a loopback HTTP proxy in front of an S3 endpoint that
// counts the PUTs of multipart parts (by part number, those the bucket
// answered 2xx) and can hold them: the bucket's side of a link that
// stalls mid-upload (a held part never reaches the bucket). It can also
// make the bucket slow to copy and to assemble (SlowCopies). Give the
// service S3_ENDPOINT=URL: its presigned URLs then name the proxy (the
// signature covers the proxy's host, which the proxy passes on), and its
// own calls go through unchanged. Safe for concurrent use.
type PartProxy struct {
	URL string

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	gen       int           // counts Hold calls: what a PUT was admitted or held under
	admitted  int           // part PUTs let through since Hold
	holdAfter int           // -1: hold nothing
	// doneNow and heldNow count, since Hold, the parts answered 2xx and
	// those held now.
	doneNow, heldNow int
	drop             chan struct{} // closed by Unhold: the held parts fail
	done             map[int]int   // part number → PUTs answered 2xx
	inFlight         int
	maxInFlight      int
	stop             chan struct{}
	// copyDelay and completeDelay hold the answers of CopyObject and
	// CompleteMultipartUpload (SlowCopies).
	copyDelay, completeDelay time.Duration
}

// maxHeldBody bounds the body of one held part (S3's largest part is
// 5 GiB; the tests' are a few MiB).
const maxHeldBody = 64 << 20

// StartPartProxy serves a proxy of target (an S3 endpoint's base URL) on
// a free loopback port until tb's cleanup, which also lets go of any
// held request.
func StartPartProxy(tb testing.TB, target string) *PartProxy {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	p := &PartProxy{holdAfter: -1, drop: make(chan struct{}), done: map[int]int{},
		changed: make(chan struct{}), stop: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // a client stopped mid-part is what the tests do
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		part, isPart := partNumber(r)
		if !isPart {
			if d := p.slowFor(r); d > 0 {
				p.late(w, r, rp, d)
				return
			}
			rp.ServeHTTP(w, r)
			return
		}
		gen, ok := p.admit(w, r)
		if !ok {
			return
		}
		p.count(&p.inFlight, 1)
		rec := &statusWriter{ResponseWriter: w}
		rp.ServeHTTP(rec, r)
		p.count(&p.inFlight, -1)
		if rec.status/100 == 2 {
			p.mu.Lock()
			p.done[part]++
			if gen == p.gen {
				p.doneNow++
			}
			p.notify()
			p.mu.Unlock()
		}
	}))
	tb.Cleanup(hs.Close)
	tb.Cleanup(func() { close(p.stop) }) // runs first: held handlers end
	p.URL = hs.URL
	return p
}

// SlowCopies makes the bucket slow to copy and to assemble: each
// CopyObject's answer is held copying, each CompleteMultipartUpload's
// completing, once the bucket gave it (the work is done, its answer late,
// as from a store that takes that long over the bytes). A client that
// gives up meanwhile (its deadline) gets no answer. 0 holds none.
func (p *PartProxy) SlowCopies(copying, completing time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.copyDelay, p.completeDelay = copying, completing
}

// slowFor is how long r's answer is held: a CopyObject (a PUT naming
// its source) or a CompleteMultipartUpload (a POST with an uploadId).
func (p *PartProxy) slowFor(r *http.Request) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		return p.copyDelay
	case r.Method == http.MethodPost && r.URL.Query().Has("uploadId"):
		return p.completeDelay
	}
	return 0
}

// late forwards r and holds the bucket's answer d, or until the client
// or the proxy ends.
func (p *PartProxy) late(w http.ResponseWriter, r *http.Request, rp http.Handler, d time.Duration) {
	rec := httptest.NewRecorder()
	rp.ServeHTTP(rec, r)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	case <-p.stop:
		return
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// partNumber is the part number of a part's PUT.
func partNumber(r *http.Request) (int, bool) {
	if r.Method != http.MethodPut {
		return 0, false
	}
	n, err := strconv.Atoi(r.URL.Query().Get("partNumber"))
	return n, err == nil
}

// admit lets a part PUT through (true, with the Hold it came under), or
// holds it, reading its body so that the client waits for an answer and
// a client that dies is noticed, until Unhold, the client's end or the
// proxy's; a held part is answered 503, never forwarded.
func (p *PartProxy) admit(w http.ResponseWriter, r *http.Request) (int, bool) {
	p.mu.Lock()
	gen := p.gen
	if p.holdAfter < 0 || p.admitted < p.holdAfter {
		p.admitted++
		p.mu.Unlock()
		return gen, true
	}
	drop := p.drop
	p.heldNow++
	p.notify()
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if gen == p.gen {
			p.heldNow--
		}
		p.notify()
		p.mu.Unlock()
	}()
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxHeldBody))
	select {
	case <-drop:
	case <-r.Context().Done():
	case <-p.stop:
	}
	http.Error(w, "held by the test's proxy", http.StatusServiceUnavailable)
	return gen, false
}

func (p *PartProxy) count(n *int, d int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	*n += d
	p.maxInFlight = max(p.maxInFlight, p.inFlight)
	p.notify()
}

// notify wakes the waiters; p.mu is held.
func (p *PartProxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Hold lets the next n part PUTs through and holds every later one, until
// Unhold.
func (p *PartProxy) Hold(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	p.holdAfter, p.admitted, p.doneNow, p.heldNow = n, 0, 0, 0
}

// Unhold holds no more part PUTs, and fails those held (503): they never
// reach the bucket.
func (p *PartProxy) Unhold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdAfter = -1
	close(p.drop)
	p.drop = make(chan struct{})
}

// Reset forgets the counts (Parts, MaxInFlight).
func (p *PartProxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = map[int]int{}
	p.maxInFlight = p.inFlight
}

// Parts returns, by part number, the part PUTs the bucket answered 2xx
// since the last Reset.
func (p *PartProxy) Parts() map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.done)
}

// MaxInFlight is the most part PUTs that were in the bucket's hands at
// once since the last Reset.
func (p *PartProxy) MaxInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxInFlight
}

// WaitHeld waits until, since Hold, done part PUTs were answered and at
// least one is held: an upload stalled mid-way. It returns false if ctx
// ends first.
func (p *PartProxy) WaitHeld(ctx context.Context, done int) bool {
	for {
		p.mu.Lock()
		ok, ch := p.doneNow >= done && p.heldNow > 0, p.changed
		p.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
