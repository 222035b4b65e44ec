package downloadlink

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
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
	l, err := s.Sign(context.Background(), ws, file)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(5 * time.Minute).Truncate(time.Second); !l.Expires.Equal(want) {
		t.Fatalf("Expires %v, want %v", l.Expires, want)
	}
	q, err := url.ParseQuery(l.Query)
	if err != nil || len(q) != 3 || q.Get(ParamKey) != KeyID(testKey) {
		t.Fatalf("query %q: %v", l.Query, err)
	}
	exp, kid, sig := q.Get(ParamExpires), q.Get(ParamKey), q.Get(ParamSignature)
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
		exp, kid  string
		sig       string
		wantError error
	}{
		{"Good", s, ws, file, exp, kid, sig, nil},
		{"GoodUntilItsLastSecond", later(5*time.Minute - 501*time.Millisecond), ws, file, exp, kid, sig, nil},
		{"ErrExpired", later(5*time.Minute - 500*time.Millisecond), ws, file, exp, kid, sig, ErrExpired},
		{"ErrExpiredLongAfter", later(time.Hour), ws, file, exp, kid, sig, ErrExpired},
		{"ErrInvalidSignatureAltered", s, ws, file, exp, kid, flip(sig), ErrInvalid},
		{"ErrInvalidSignatureCut", s, ws, file, exp, kid, sig[:len(sig)-1], ErrInvalid},
		{"ErrInvalidNoSignature", s, ws, file, exp, kid, "", ErrInvalid},
		{"ErrInvalidExpiresMoved", s, ws, file, exp + "0", kid, sig, ErrInvalid},
		{"ErrInvalidNoExpires", s, ws, file, "", kid, sig, ErrInvalid},
		{"ErrInvalidOtherFile", s, ws, uuid.New(), exp, kid, sig, ErrInvalid},
		{"ErrInvalidOtherWorkspace", s, uuid.New(), file, exp, kid, sig, ErrInvalid},
		{"ErrInvalidOtherKey", signer(t, strings.ToUpper(testKey), t0), ws, file, exp, kid, sig, ErrInvalid},
		{"ErrInvalidOtherKeyNamed", s, ws, file, exp, KeyID(strings.ToUpper(testKey)), sig, ErrInvalid},
		{"GoodWithoutKey", s, ws, file, exp, "", sig, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v, err := tc.s.Check(context.Background(), tc.ws, tc.file, tc.exp, tc.kid, tc.sig); !errors.Is(err, tc.wantError) || (err == nil) != (tc.wantError == nil) || (err == nil) == v.IsZero() {
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

// keyStore is a secret's current and previous versions as a test moves
// them, read by reloading Signers; reads counts the reads.
type keyStore struct {
	mu    sync.Mutex
	keys  Keys
	err   error
	reads int
}

func (k *keyStore) read(context.Context) (Keys, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reads++
	return k.keys, k.err
}

func (k *keyStore) rotate(key string, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = Keys{Current: key, Previous: k.keys.Current, Rotated: at}
}

// TestRotation: two Signers on one key store, one read before a rotation
// and one after, accept each other's links during the overlap (the
// instance that has not seen the rotation reads the keys again when a
// link names the new key); the previous key's links are refused after
// TTL + KeysMaxAge; a Signer signs with the new key at most KeysMaxAge
// after the rotation; made-up key ids read the store at most once every
// ReloadEvery; keys due to be read again that cannot be are
// ErrKeysUnavailable, never used stale.
func TestRotation(t *testing.T) {
	ctx := context.Background()
	const k1, k2 = testKey + "-one", testKey + "-two"
	// NewReloading reads the keys at time.Now, before the test's clock
	// is set: the clock starts there.
	t0 := time.Now()
	now := t0
	clock := func() time.Time { return now }
	store := &keyStore{keys: Keys{Current: k1}}
	ttl := 5 * time.Minute
	reloading := func() *Signer {
		s, err := NewReloading(ctx, ttl, store.read)
		if err != nil {
			t.Fatal(err)
		}
		s.Now = clock
		return s
	}
	old := reloading()
	now = t0.Add(10 * time.Second)
	store.rotate(k2, now)
	rotated := now
	fresh := reloading()

	ws, file := uuid.New(), uuid.New()
	sign := func(s *Signer) url.Values {
		t.Helper()
		l, err := s.Sign(ctx, ws, file)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := url.ParseQuery(l.Query)
		return q
	}
	check := func(s *Signer, q url.Values) error {
		_, err := s.Check(ctx, ws, file, q.Get(ParamExpires), q.Get(ParamKey), q.Get(ParamSignature))
		return err
	}

	byOld, byFresh := sign(old), sign(fresh)
	if byOld.Get(ParamKey) != KeyID(k1) || byFresh.Get(ParamKey) != KeyID(k2) {
		t.Fatalf("keys named: old %s, fresh %s; want %s, %s", byOld.Get(ParamKey), byFresh.Get(ParamKey), KeyID(k1), KeyID(k2))
	}
	t.Run("OldLinkOnFresh", func(t *testing.T) {
		if err := check(fresh, byOld); err != nil {
			t.Errorf("got %v, want the previous key's link good during the overlap", err)
		}
	})
	t.Run("FreshLinkOnOld", func(t *testing.T) {
		before := store.reads
		if err := check(old, byFresh); err != nil {
			t.Errorf("got %v, want the new key's link good on an instance read before the rotation", err)
		}
		if n := store.reads - before; n != 1 {
			t.Errorf("%d reads of the keys, want 1", n)
		}
		if q := sign(old); q.Get(ParamKey) != KeyID(k2) {
			t.Errorf("old signs with %s after reading the keys again, want %s", q.Get(ParamKey), KeyID(k2))
		}
	})
	t.Run("MadeUpKeysReadAtMostEveryReloadEvery", func(t *testing.T) {
		made := url.Values{ParamExpires: byFresh[ParamExpires], ParamKey: {KeyID("made-up")}, ParamSignature: byFresh[ParamSignature]}
		before := store.reads
		for range 5 {
			if err := check(fresh, made); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		}
		if n := store.reads - before; n > 1 {
			t.Errorf("%d reads of the keys for 5 made-up links within ReloadEvery, want at most 1", n)
		}
	})
	t.Run("OldLinkRefusedAfterOverlap", func(t *testing.T) {
		// A link of the previous key signed late, by an instance that had
		// not seen the rotation, expiring at the overlap's end.
		late := reloadingAt(t, ctx, ttl, Keys{Current: k1}, func() time.Time { return rotated.Add(KeysMaxAge - time.Second) })
		q := sign(late)
		now = rotated.Add(ttl + KeysMaxAge - 2*time.Second)
		if err := check(fresh, q); err != nil {
			t.Errorf("within the overlap: got %v, want good", err)
		}
		now = rotated.Add(ttl + KeysMaxAge)
		if err := check(fresh, q); !errors.Is(err, ErrInvalid) {
			t.Errorf("after the overlap: got %v, want ErrInvalid", err)
		}
		if err := check(fresh, sign(fresh)); err != nil {
			t.Errorf("the current key's link: got %v, want good", err)
		}
	})
	t.Run("ErrKeysUnavailable", func(t *testing.T) {
		store.mu.Lock()
		store.err = errors.New("secrets manager down")
		store.mu.Unlock()
		now = now.Add(KeysMaxAge)
		if _, err := fresh.Sign(ctx, ws, file); !errors.Is(err, ErrKeysUnavailable) {
			t.Errorf("sign with keys a minute old, unreadable: got %v, want ErrKeysUnavailable", err)
		}
		if err := check(fresh, byFresh); !errors.Is(err, ErrKeysUnavailable) {
			t.Errorf("check with keys a minute old, unreadable: got %v, want ErrKeysUnavailable", err)
		}
		store.mu.Lock()
		store.err = nil
		store.mu.Unlock()
		now = now.Add(ReloadEvery)
		if _, err := fresh.Sign(ctx, ws, file); err != nil {
			t.Errorf("once the keys read again: got %v", err)
		}
	})
}

// reloadingAt is a reloading Signer whose store holds k, at clock.
func reloadingAt(t *testing.T, ctx context.Context, ttl time.Duration, k Keys, clock func() time.Time) *Signer {
	t.Helper()
	s, err := NewReloading(ctx, ttl, func(context.Context) (Keys, error) { return k, nil })
	if err != nil {
		t.Fatal(err)
	}
	s.Now = clock
	return s
}

// TestNewLazy: a Signer of NewLazy reads nothing when made; its first
// Sign reads the keys, and a store that cannot answer then is
// ErrKeysUnavailable, read again no sooner than ReloadEvery (concurrent
// calls share one read); a link naming a key it does not hold is read
// for at once after a read that was due (a rotation seen elsewhere
// first), and made-up keys at most once every ReloadEvery.
func TestNewLazy(t *testing.T) {
	ctx := context.Background()
	const k1, k2 = testKey + "-one", testKey + "-two"
	store := &keyStore{keys: Keys{Current: k1}, err: errors.New("database paused")}
	s, err := NewLazy(5*time.Minute, store.read)
	if err != nil || store.reads != 0 {
		t.Fatalf("NewLazy: %v, %d reads; want none", err, store.reads)
	}
	now := time.Now()
	s.Now = func() time.Time { return now }
	ws, file := uuid.New(), uuid.New()

	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Sign(ctx, ws, file); !errors.Is(err, ErrKeysUnavailable) {
				t.Errorf("sign, the store down: got %v, want ErrKeysUnavailable", err)
			}
		}()
	}
	wg.Wait()
	if store.reads != 1 {
		t.Errorf("5 signs at once, the store down: %d reads, want 1", store.reads)
	}
	store.mu.Lock()
	store.err = nil
	store.mu.Unlock()
	if _, err := s.Sign(ctx, ws, file); !errors.Is(err, ErrKeysUnavailable) || store.reads != 1 {
		t.Errorf("within ReloadEvery of the failed read: got %v, %d reads; want ErrKeysUnavailable, no read", err, store.reads)
	}
	now = now.Add(ReloadEvery)
	if l, err := s.Sign(ctx, ws, file); err != nil || !strings.Contains(l.Query, KeyID(k1)) {
		t.Fatalf("the store back: got %v, %v; want a link of the first key", l, err)
	}

	// Another instance saw a rotation first: its link names k2.
	store.rotate(k2, now)
	other, err := New(k2, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other.Now = s.Now
	l, err := other.Sign(ctx, ws, file)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.ParseQuery(l.Query)
	reads := store.reads
	if _, err := s.Check(ctx, ws, file, q.Get(ParamExpires), q.Get(ParamKey), q.Get(ParamSignature)); err != nil || store.reads != reads+1 {
		t.Errorf("a link of the new key right after the first read: got %v, %d reads; want good, one read", err, store.reads-reads)
	}
	for range 3 {
		if _, err := s.Check(ctx, ws, file, q.Get(ParamExpires), KeyID("made-up"), q.Get(ParamSignature)); !errors.Is(err, ErrInvalid) {
			t.Errorf("a made-up key: got %v, want ErrInvalid", err)
		}
	}
	if store.reads != reads+1 {
		t.Errorf("made-up keys within ReloadEvery of a read for one: %d reads, want none", store.reads-reads-1)
	}
}
