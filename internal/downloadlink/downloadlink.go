// Package downloadlink signs and checks download links: a capability to
// read one file's bytes with a bare GET (no header, no cookie) for a
// bounded time, so that a browser's download manager can fetch the file
// itself, with its progress bar and its resume.
//
// A link is the file's download path (its workspace and file IDs) with
// three query parameters: expires (Unix seconds), key (the id of the key
// that signed it, KeyID: a few bytes of the key's hash, which tell
// nothing of it) and signature, the HMAC-SHA256 under that key of the
// workspace, the file and expires, base64url without padding. Nothing is
// stored: a link is checked by recomputing its signature, in constant
// time, and is good until expires, checked when a request starts. The
// signature travels in the query string, which neither the service's
// request logs nor API Gateway's access-log format writes (both log the
// path alone).
//
// Keys rotate without breaking live links (Keys): a Signer signs with the
// current key, and checks links of the current key and, for TTL plus
// KeysMaxAge after a rotation, of the previous one. A Signer whose keys
// are read from a store (NewReloading: the secret's current and previous
// versions; NewLazy: the database's newest two keys) reads them again when a link names a key it does not hold (a
// rotation another instance has seen first), and when they are older
// than KeysMaxAge, so that two instances, one started before a rotation
// and one after, accept each other's links.
package downloadlink

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
)

// The query parameters of a link.
const (
	ParamExpires   = "expires"
	ParamKey       = "key"
	ParamSignature = "signature"
)

// MinKeyBytes is the shortest key accepted (DOWNLOAD_LINK_KEY).
const MinKeyBytes = 32

// Errors of Check. HTTP answers both with 403 and a code of its own.
var (
	// ErrInvalid: a link this deployment did not sign for this file (a
	// parameter missing, altered or malformed, another file's link, a
	// link of another key).
	ErrInvalid = errors.New("downloadlink: invalid link")
	// ErrExpired: a link this deployment signed, past its expiry.
	ErrExpired = errors.New("downloadlink: link expired")
	// ErrKeysUnavailable: the keys could not be read again when they had
	// to be (older than KeysMaxAge, or a link named a key not held): the
	// link is neither signed nor checked with keys that may be stale.
	// HTTP answers 503.
	ErrKeysUnavailable = errors.New("downloadlink: keys unavailable")
)

// KeysMaxAge is how long a reloading Signer uses the keys it read before
// it reads them again (at its next Sign or Check): the longest an
// instance that has not seen a rotation keeps signing with the key it
// replaced. A rotation's previous key is accepted for TTL plus this.
const KeysMaxAge = time.Minute

// ReloadEvery bounds the reads a reloading Signer makes for links naming
// a key it does not hold: at most one every ReloadEvery, so that made-up
// key ids cost the key store nothing more.
const ReloadEvery = 10 * time.Second

// ReloadTimeout bounds one read of the keys again.
const ReloadTimeout = 3 * time.Second

// Keys are a Signer's keys: Current signs and checks; Previous, the key
// Current replaced at Rotated, checks links until Rotated + TTL +
// KeysMaxAge, the last a link signed with it by an instance that had not
// yet seen the rotation can expire ("" for none).
type Keys struct {
	Current  string
	Previous string
	Rotated  time.Time
}

// KeyID is the id of key that a link carries (ParamKey): the first 6
// bytes of a SHA-256 of the key, base64url (8 characters). It names the
// key among the few a Signer holds, and tells nothing of it.
func KeyID(key string) string {
	sum := sha256.Sum256([]byte("pendinguploads download link key id\n" + key))
	return base64.RawURLEncoding.EncodeToString(sum[:6])
}

// Signer signs and checks links with its Keys. It is safe for
// concurrent use.
type Signer struct {
	// TTL is how long a link lasts from Sign (DOWNLOAD_LINK_TTL).
	TTL time.Duration
	// Now is the clock (New sets time.Now).
	Now func() time.Time

	// reload reads the keys again (NewReloading); nil: they never change.
	reload func(context.Context) (Keys, error)
	// reloading is held by the one call reading the keys again; the
	// others wait for its keys.
	reloading sync.Mutex
	mu        sync.Mutex // guards what follows
	keys      Keys
	read      time.Time // when keys were read
	tried     time.Time // the last read for an unknown key, or a failed one
}

// New returns a Signer with one key (at least MinKeyBytes), which never
// changes, and ttl (positive).
func New(key string, ttl time.Duration) (*Signer, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("downloadlink: ttl %s is not positive", ttl)
	}
	s := &Signer{TTL: ttl, Now: time.Now}
	if err := s.setKeys(Keys{Current: key}, time.Time{}); err != nil {
		return nil, err
	}
	return s, nil
}

// NewReloading returns a Signer with ttl (positive) whose keys reload
// reads, now (its error is NewReloading's) and again: at the first Sign
// or Check once they are KeysMaxAge old, and when a link names a key it
// does not hold (at most once every ReloadEvery). Each key is at least
// MinKeyBytes. reload is called by one caller at a time, with the
// request's context values and ReloadTimeout.
func NewReloading(ctx context.Context, ttl time.Duration, reload func(context.Context) (Keys, error)) (*Signer, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("downloadlink: ttl %s is not positive", ttl)
	}
	s := &Signer{TTL: ttl, Now: time.Now, reload: reload}
	k, err := reload(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.setKeys(k, s.Now()); err != nil {
		return nil, err
	}
	return s, nil
}

// NewLazy returns a Signer like NewReloading's that reads its keys first
// at its first Sign or Check, not now: a process starts while the store
// of its keys (the database) cannot answer, and its Sign and Check are
// ErrKeysUnavailable until a read succeeds (tried at most once every
// ReloadEvery, with ReloadTimeout).
func NewLazy(ttl time.Duration, reload func(context.Context) (Keys, error)) (*Signer, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("downloadlink: ttl %s is not positive", ttl)
	}
	return &Signer{TTL: ttl, Now: time.Now, reload: reload}, nil
}

// setKeys checks k and makes it the Signer's, read at read.
func (s *Signer) setKeys(k Keys, read time.Time) error {
	if len(k.Current) < MinKeyBytes || (k.Previous != "" && len(k.Previous) < MinKeyBytes) {
		return fmt.Errorf("downloadlink: key shorter than %d bytes", MinKeyBytes)
	}
	s.mu.Lock()
	s.keys, s.read = k, read
	s.mu.Unlock()
	return nil
}

// current returns the keys to sign and check with, read again first
// when they are KeysMaxAge old, or when unknown (a link named a key not
// held) and no read was tried within ReloadEvery; ErrKeysUnavailable
// when they are old and could not be read again (a failed read is not
// tried again within ReloadEvery).
func (s *Signer) current(ctx context.Context, unknown bool) (Keys, error) {
	now := s.Now()
	s.mu.Lock()
	k, read, tried := s.keys, s.read, s.tried
	s.mu.Unlock()
	if s.reload == nil {
		return k, nil
	}
	held := func() (Keys, error) {
		if now.Sub(read) >= KeysMaxAge {
			return Keys{}, ErrKeysUnavailable
		}
		return k, nil
	}
	if now.Sub(read) < KeysMaxAge && !unknown || now.Sub(tried) < ReloadEvery {
		return held()
	}
	s.reloading.Lock()
	defer s.reloading.Unlock()
	s.mu.Lock()
	before := read
	k, read, tried = s.keys, s.read, s.tried
	s.mu.Unlock()
	if !read.Equal(before) || now.Sub(tried) < ReloadEvery {
		return held() // read, or tried, by another call meanwhile
	}
	// Its own bound, not the request's: a caller gone mid-read must not
	// leave the keys unread, and every caller for ReloadEvery unanswered.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReloadTimeout)
	defer cancel()
	nk, err := s.reload(rctx)
	if err == nil {
		err = s.setKeys(nk, now)
	}
	if err != nil || unknown {
		// A read that succeeded because the keys were due is not counted:
		// a link naming a key it does not hold is read for at once (the
		// first read of NewLazy's keys, a rotation seen elsewhere first).
		s.mu.Lock()
		s.tried = now
		s.mu.Unlock()
	}
	if err != nil {
		if now.Sub(read) >= KeysMaxAge {
			return Keys{}, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
		}
		return k, nil
	}
	return nk, nil
}

// Link is a signed link to one file: its query string (expires, key and
// signature, encoded) and when it expires.
type Link struct {
	Query   string
	Expires time.Time
}

// Sign returns a link to file of workspace, good for TTL from now
// (rounded down to the second), signed with the current key; a
// reloading Signer's error is ErrKeysUnavailable.
func (s *Signer) Sign(ctx context.Context, workspace, file uuid.UUID) (Link, error) {
	k, err := s.current(ctx, false)
	if err != nil {
		return Link{}, err
	}
	exp := s.Now().Add(s.TTL).Truncate(time.Second)
	e := strconv.FormatInt(exp.Unix(), 10)
	q := url.Values{ParamExpires: {e}, ParamKey: {KeyID(k.Current)}, ParamSignature: {signatureOf(k.Current, workspace, file, e)}}
	return Link{Query: q.Encode(), Expires: exp.UTC()}, nil
}

// Verified is a link Check accepted: the one file of one workspace its
// holder may fetch. Only Check makes one; the zero Verified names no file
// (IsZero), and whoever takes one refuses it.
type Verified struct {
	workspace, file uuid.UUID
}

// Workspace is the workspace of the file the link names.
func (v Verified) Workspace() uuid.UUID { return v.workspace }

// File is the file the link names.
func (v Verified) File() uuid.UUID { return v.file }

// IsZero reports whether v was not made by Check.
func (v Verified) IsZero() bool { return v == Verified{} }

// Check checks a link's expires, key and signature (as the query gave
// them) for file of workspace: the Verified file when a key of this
// Signer's signed exactly them and expires has not passed; ErrInvalid
// when none did (the key a link names is the current one, or the
// previous one until Rotated + TTL + KeysMaxAge; a link without a key,
// from before links named theirs, is checked with the current one);
// ErrExpired when one did, and the link is past its time;
// ErrKeysUnavailable when the keys had to be read again and could not.
func (s *Signer) Check(ctx context.Context, workspace, file uuid.UUID, expires, keyID, signature string) (Verified, error) {
	k, err := s.current(ctx, false)
	if err != nil {
		return Verified{}, err
	}
	key, ok := s.keyFor(k, keyID)
	if !ok && keyID != "" {
		// A key not held: perhaps a rotation another instance saw first.
		if k, err = s.current(ctx, true); err != nil {
			return Verified{}, err
		}
		key, ok = s.keyFor(k, keyID)
	}
	if !ok {
		return Verified{}, ErrInvalid
	}
	want := signatureOf(key, workspace, file, expires)
	if !hmac.Equal([]byte(signature), []byte(want)) {
		return Verified{}, ErrInvalid
	}
	// Signed by us, so expires is ours: digits that parse.
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil {
		return Verified{}, ErrInvalid
	}
	if !s.Now().Before(time.Unix(exp, 0)) {
		return Verified{}, ErrExpired
	}
	return Verified{workspace: workspace, file: file}, nil
}

// keyFor returns the key of k that keyID names and that checks links
// now: the current key ("" names it too), or the previous one within its
// overlap.
func (s *Signer) keyFor(k Keys, keyID string) (string, bool) {
	switch {
	case keyID == "" || keyID == KeyID(k.Current):
		return k.Current, true
	case k.Previous != "" && keyID == KeyID(k.Previous) && s.Now().Before(k.Rotated.Add(s.TTL+KeysMaxAge)):
		return k.Previous, true
	}
	return "", false
}

// signatureOf is the HMAC-SHA256 under key of a link's fields, base64url
// without padding: a version line, then the UUIDs in canonical form and
// expires as the query held it, one a line (expires last, so no two field
// lists give one message).
func signatureOf(key string, workspace, file uuid.UUID, expires string) string {
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "pendinguploads download link v1\n%s\n%s\n%s", workspace, file, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
