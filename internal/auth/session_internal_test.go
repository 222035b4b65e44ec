package auth

import (
	"crypto/sha256"
	"testing"
	"time"
)

// TestSessionCacheExpiresAndIsBounded: members are kept MemberTTL and
// refusals RefusalTTL; the cache never holds more than MaxSessionEntries.
func TestSessionCacheExpiresAndIsBounded(t *testing.T) {
	s, err := NewSessions("http://127.0.0.1:1", "acme")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	s.now = func() time.Time { return now }
	member := sha256.Sum256([]byte("acme\x00session=member"))
	refused := sha256.Sum256([]byte("acme\x00session=refused"))
	s.keep(member, verdict{userID: "u", expires: now.Add(MemberTTL)})
	s.keep(refused, verdict{expires: now.Add(RefusalTTL)})
	now = now.Add(RefusalTTL)
	if _, ok := s.cached(refused); ok {
		t.Fatal("a refusal outlived RefusalTTL")
	}
	if _, ok := s.cached(member); !ok {
		t.Fatal("a member expired before MemberTTL")
	}
	now = now.Add(MemberTTL - RefusalTTL)
	if _, ok := s.cached(member); ok {
		t.Fatal("a member outlived MemberTTL")
	}
	for i := range MaxSessionEntries + 500 {
		s.keep(sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)}), verdict{userID: "u", expires: now.Add(MemberTTL)})
		if len(s.cache) > MaxSessionEntries {
			t.Fatalf("cache holds %d entries, want at most %d", len(s.cache), MaxSessionEntries)
		}
	}
}
