package downloadlink

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

const testKey = "0123456789abcdef0123456789abcdef-test"

func signer(t *testing.T, key string, now time.Time) *Signer {
	t.Helper()
	s, err := New(key, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.Now = func() time.Time { return now }
	return s
}

// TestCheck: a link checks for the file it was signed for, until it
// expires; any change to it, another file's or workspace's path, or
// another key, is ErrInvalid; past its time (at the second it names
// included) ErrExpired.
func TestCheck(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 23, 0, 0, 500e6, time.UTC)
	s := signer(t, testKey, t0)
	ws, file := uuid.New(), uuid.New()
	l := s.Sign(ws, file)
	if want := t0.Add(5 * time.Minute).Truncate(time.Second); !l.Expires.Equal(want) {
		t.Fatalf("Expires %v, want %v", l.Expires, want)
	}
	q, err := url.ParseQuery(l.Query)
	if err != nil || len(q) != 2 {
		t.Fatalf("query %q: %v", l.Query, err)
	}
	exp, sig := q.Get(ParamExpires), q.Get(ParamSignature)
	flip := func(s string) string {
		b := []byte(s)
		if b[0] == 'A' {
			b[0] = 'B'
		} else {
			b[0] = 'A'
		}
		return string(b)
	}
	later := func(d time.Duration) *Signer { return signer(t, testKey, t0.Add(d)) }
	for _, tc := range []struct {
		name      string
		s         *Signer
		ws, file  uuid.UUID
		exp, sig  string
		wantError error
	}{
		{"Good", s, ws, file, exp, sig, nil},
		{"GoodUntilItsLastSecond", later(5*time.Minute - 501*time.Millisecond), ws, file, exp, sig, nil},
		{"ErrExpired", later(5*time.Minute - 500*time.Millisecond), ws, file, exp, sig, ErrExpired},
		{"ErrExpiredLongAfter", later(time.Hour), ws, file, exp, sig, ErrExpired},
		{"ErrInvalidSignatureAltered", s, ws, file, exp, flip(sig), ErrInvalid},
		{"ErrInvalidSignatureCut", s, ws, file, exp, sig[:len(sig)-1], ErrInvalid},
		{"ErrInvalidNoSignature", s, ws, file, exp, "", ErrInvalid},
		{"ErrInvalidExpiresMoved", s, ws, file, exp + "0", sig, ErrInvalid},
		{"ErrInvalidNoExpires", s, ws, file, "", sig, ErrInvalid},
		{"ErrInvalidOtherFile", s, ws, uuid.New(), exp, sig, ErrInvalid},
		{"ErrInvalidOtherWorkspace", s, uuid.New(), file, exp, sig, ErrInvalid},
		{"ErrInvalidOtherKey", signer(t, strings.ToUpper(testKey), t0), ws, file, exp, sig, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v, err := tc.s.Check(tc.ws, tc.file, tc.exp, tc.sig); !errors.Is(err, tc.wantError) || (err == nil) != (tc.wantError == nil) || (err == nil) == v.IsZero() {
				t.Errorf("got %v, want %v", err, tc.wantError)
			}
		})
	}
}

// TestNew: a short key or a TTL that is not positive is refused.
func TestNew(t *testing.T) {
	if _, err := New(testKey[:MinKeyBytes-1], time.Minute); err == nil {
		t.Error("short key: got no error")
	}
	if _, err := New(testKey, 0); err == nil {
		t.Error("zero TTL: got no error")
	}
}
