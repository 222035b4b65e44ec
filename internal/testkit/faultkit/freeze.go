package faultkit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

const (
	// AnswerBound is API.md's bound on any answer while a dependency is
	// down or frozen.
	AnswerBound = 15 * time.Second
	// clientTimeout only keeps a hang from hanging the test.
	clientTimeout = 40 * time.Second
	// recoveryBound is how long after the thaw every call must answer 200
	// again (a pooled connection broken by the freeze may fail once).
	recoveryBound = 15 * time.Second
)

// Call is one request a freeze test sends, again and again.
type Call struct {
	Name, Method, URL, Token string
	// Body, when set, makes the Content-Type and body of the n-th send
	// (a fresh file name each time, so that what was stored can be told
	// apart).
	Body func(n int) (ctype string, body []byte)
	// NeedsFrozen says the call reaches the frozen dependency: sent during
	// the freeze it must be a 503. Other calls must stay 200.
	NeedsFrozen bool
}

// Sent is one send of a Call and its answer.
type Sent struct {
	Call string
	N    int
	// DuringFreeze: sent after the freeze began (and answered before the
	// thaw). Otherwise it was in flight when the freeze began, and its
	// outcome is legitimately either way.
	DuringFreeze bool
	Res          Response
	Err          error
}

// OK reports whether the send was answered 200.
func (s Sent) OK() bool { return s.Err == nil && s.Res.Status == http.StatusOK }

// Frozen runs calls in a loop, freezes the dependency (freeze), sends each
// call twice more while it is frozen, lets every request end, thaws it,
// and waits for every call to answer 200 again. It fails t when an answer
// takes longer than AnswerBound, when a call that needs the frozen
// dependency is not a 503 with API.md's unavailable JSON while it is
// frozen (or another call is not a 200), or when the service does not
// recover. It returns every send, for the caller's checks of what was
// stored.
func Frozen(t *testing.T, calls []Call, freeze, thaw func() error) []Sent {
	t.Helper()
	client := &http.Client{}
	var (
		mu   sync.Mutex
		sent []Sent
		seq  = map[string]int{}
	)
	send := func(c Call, during bool) Sent {
		mu.Lock()
		seq[c.Name]++
		n := seq[c.Name]
		mu.Unlock()
		var ctype string
		var body []byte
		if c.Body != nil {
			ctype, body = c.Body(n)
		}
		res, err := Do(client, clientTimeout, c.Method, c.URL, c.Token, ctype, body)
		s := Sent{Call: c.Name, N: n, DuringFreeze: during, Res: res, Err: err}
		mu.Lock()
		sent = append(sent, s)
		mu.Unlock()
		return s
	}

	// Phase 1: load, until the freeze.
	quit := make(chan struct{})
	var loops sync.WaitGroup
	for _, c := range calls {
		loops.Go(func() {
			for {
				select {
				case <-quit:
					return
				default:
				}
				send(c, false)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = thaw()
		}
	})
	if err := freeze(); err != nil {
		t.Fatalf("freeze: %v", err)
	}
	close(quit)
	// Phase 2: each call twice, sent while frozen.
	var during sync.WaitGroup
	for _, c := range calls {
		for range 2 {
			during.Go(func() { send(c, true) })
		}
	}
	during.Wait()
	loops.Wait()
	if err := thaw(); err != nil {
		t.Fatalf("thaw: %v", err)
	}
	thawed = true

	byName := map[string]Call{}
	for _, c := range calls {
		byName[c.Name] = c
	}
	frozen503 := map[string]int{}
	for _, s := range sent {
		c := byName[s.Call]
		if s.Err != nil {
			t.Errorf("%s #%d: no answer after %s: %v", s.Call, s.N, s.Res.Elapsed.Round(time.Millisecond), s.Err)
			continue
		}
		if s.Res.Elapsed > AnswerBound {
			t.Errorf("%s #%d: answered %d after %s, want within %s", s.Call, s.N, s.Res.Status, s.Res.Elapsed.Round(time.Millisecond), AnswerBound)
		}
		switch {
		case s.Res.Status == http.StatusServiceUnavailable:
			if msg := CheckUnavailable(s.Res.Body); msg != "" {
				t.Errorf("%s #%d: 503 body %s: %s", s.Call, s.N, s.Res.Body, msg)
			}
			if !c.NeedsFrozen {
				t.Errorf("%s #%d: 503, want 200 (it does not need the frozen dependency)", s.Call, s.N)
			}
			if s.DuringFreeze {
				frozen503[s.Call]++
			}
		case s.Res.Status == http.StatusOK:
			if s.DuringFreeze && c.NeedsFrozen {
				t.Errorf("%s #%d: 200 while frozen, want 503", s.Call, s.N)
			}
		default:
			t.Errorf("%s #%d: got %d %s, want 200 or 503", s.Call, s.N, s.Res.Status, s.Res.Body)
		}
	}
	for _, c := range calls {
		if c.NeedsFrozen && frozen503[c.Name] != 2 {
			t.Errorf("%s: %d of 2 sends while frozen answered 503", c.Name, frozen503[c.Name])
		}
	}

	deadline := time.Now().Add(recoveryBound)
	for _, c := range calls {
		for {
			s := send(c, false)
			if s.OK() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after the thaw: %d %s %v, want 200", c.Name, s.Res.Status, s.Res.Body, s.Err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return sent
}

// CheckUnavailable returns what is wrong with a 503 body, or "".
func CheckUnavailable(b []byte) string {
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return "not JSON: " + err.Error()
	}
	if e.Code != "unavailable" {
		return fmt.Sprintf("code %q, want unavailable", e.Code)
	}
	switch e.Error {
	case "storage unavailable, retry shortly":
		return ""
	case "workspace busy, retry shortly":
		// An upload behind another of its workspace in the process, which
		// waits on the frozen dependency: its turn did not come in time.
		return ""
	}
	return fmt.Sprintf("error %q", e.Error)
}
