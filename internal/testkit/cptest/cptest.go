// Package cptest is a real HTTP stand-in for the control plane's
// tenant-member check, as the platform's control plane answers it:
// GET /cp/auth/tenant-member?slug=<slug> with the browser's Cookie header
// is 200 {"member": true, "user_id": "…"} for a member of that tenant.
// It counts its calls, so tests can tell what was cached.
package cptest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CookieName is the session cookie the stand-in reads.
const CookieName = "cp_session"

// Session values with a behaviour of their own (any other value not made
// a member by AddMember is refused with a 401).
const (
	Stranger = "stranger" // 200 {"member": false}
	NoUser   = "nouser"   // 200 {"member": true} without a user_id
	Broken   = "broken"   // 502
	Slow     = "slow"     // answers nothing until the caller gives up
)

// Server is a running stand-in.
type Server struct {
	URL  string
	Slug string

	calls   atomic.Int64
	down    atomic.Bool
	mu      sync.Mutex
	members map[string]string // session value → user id
	callsBy map[string]int    // session value → checks answered
}

// Start starts a stand-in for the tenant slug; it stops at cleanup.
func Start(tb testing.TB, slug string) *Server {
	tb.Helper()
	s := &Server{Slug: slug, members: map[string]string{}, callsBy: map[string]int{}}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// AddMember makes the session value a member of the tenant, as userID.
func (s *Server) AddMember(session, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[session] = userID
}

// SetDown makes every answer a 503 (down: true) or not.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// Calls is how many checks the stand-in answered.
func (s *Server) Calls() int64 { return s.calls.Load() }

// CallsFor is how many checks of the session value it answered.
func (s *Server) CallsFor(session string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.callsBy[session]
}

// Env is the service's settings that point at the stand-in.
func (s *Server) Env() map[string]string {
	return map[string]string{"CP_UPSTREAM_URL": s.URL, "MOLECULE_ORG_SLUG": s.Slug}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	if s.down.Load() {
		http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/cp/auth/tenant-member" || r.URL.Query().Get("slug") != s.Slug {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		http.Error(w, `{"error":"no session"}`, http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	user, member := s.members[c.Value]
	s.callsBy[c.Value]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case member:
		_, _ = w.Write([]byte(`{"member": true, "user_id": "` + user + `"}`))
	case c.Value == Stranger:
		_, _ = w.Write([]byte(`{"member": false, "user_id": "someone-else"}`))
	case c.Value == NoUser:
		_, _ = w.Write([]byte(`{"member": true}`))
	case c.Value == Broken:
		http.Error(w, `{"error":"bad gateway"}`, http.StatusBadGateway)
	case c.Value == Slow:
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	default:
		http.Error(w, `{"error":"unknown session"}`, http.StatusUnauthorized)
	}
}
