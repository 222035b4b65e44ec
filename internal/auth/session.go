package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Session checks: the control plane's verdict on a cookie, and how long
// it is kept.
const (
	// SessionTimeout bounds one call to the control plane: a slow one
	// never holds a request past its deadline.
	SessionTimeout = 3 * time.Second
	// MemberTTL is how long a member's verdict is kept.
	MemberTTL = 30 * time.Second
	// RefusalTTL is how long a refusal is kept.
	RefusalTTL = 5 * time.Second
	// MaxSessionEntries bounds the verdict cache.
	MaxSessionEntries = 10000
	// maxVerdictBytes bounds the control plane's answer read.
	maxVerdictBytes = 64 << 10
)

// ErrSessionUnavailable: the control plane could not give a verdict (it
// is unreachable, too slow, or failed on its side). Not cached; HTTP
// answers 503, worth a retry.
var ErrSessionUnavailable = errors.New("auth: control plane unavailable")

// Sessions verifies control-plane session cookies: a cookie is a member
// of this tenant when GET {upstream}/cp/auth/tenant-member?slug={slug},
// carrying that Cookie header, answers 200 {"member": true, "user_id":
// "…"}. Verdicts are cached by a digest of (slug, cookie), never the
// cookie itself: members MemberTTL, refusals RefusalTTL, at most
// MaxSessionEntries. It is safe for concurrent use.
type Sessions struct {
	endpoint string // the verdict URL, slug included
	slug     string
	client   *http.Client
	now      func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]verdict
}

type verdict struct {
	userID  string // "" for a refusal
	expires time.Time
}

// NewSessions returns the session check against the control plane at
// upstream (CP_UPSTREAM_URL) for the tenant slug (MOLECULE_ORG_SLUG): the
// deployment's own setting, never a request's.
func NewSessions(upstream, slug string) (*Sessions, error) {
	u, err := url.Parse(strings.TrimRight(upstream, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("auth: control plane URL %q: want http(s)://host[/path]", upstream)
	}
	if slug == "" {
		return nil, errors.New("auth: empty tenant slug")
	}
	u = u.JoinPath("cp", "auth", "tenant-member")
	u.RawQuery = url.Values{"slug": {slug}}.Encode()
	return &Sessions{
		endpoint: u.String(),
		slug:     slug,
		// No redirects: a verdict is this URL's answer, and the cookie
		// goes nowhere else.
		client: &http.Client{Timeout: SessionTimeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		now:   time.Now,
		cache: map[[sha256.Size]byte]verdict{},
	}, nil
}

// Verify returns the user id of a cookie of a member of this tenant;
// ErrInvalid for a cookie the control plane refuses; ErrSessionUnavailable
// (wrapping the cause) when it gives no verdict.
func (s *Sessions) Verify(ctx context.Context, cookie string) (string, error) {
	key := sha256.Sum256([]byte(s.slug + "\x00" + cookie))
	if v, ok := s.cached(key); ok {
		if v.userID == "" {
			return "", ErrInvalid
		}
		return v.userID, nil
	}
	userID, err := s.ask(ctx, cookie)
	switch {
	case err == nil:
		s.keep(key, verdict{userID: userID, expires: s.now().Add(MemberTTL)})
		return userID, nil
	case errors.Is(err, ErrInvalid):
		s.keep(key, verdict{expires: s.now().Add(RefusalTTL)})
		return "", err
	}
	return "", err
}

// ask calls the control plane.
func (s *Sessions) ask(ctx context.Context, cookie string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, SessionTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.endpoint, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSessionUnavailable, err)
	}
	req.Header.Set("Cookie", cookie)
	req.Header.Set("Accept", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSessionUnavailable, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxVerdictBytes))
	switch {
	case res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests:
		return "", fmt.Errorf("%w: control plane answered %d", ErrSessionUnavailable, res.StatusCode)
	case res.StatusCode != http.StatusOK:
		return "", fmt.Errorf("%w: control plane answered %d", ErrInvalid, res.StatusCode)
	case err != nil:
		return "", fmt.Errorf("%w: reading the answer: %w", ErrSessionUnavailable, err)
	}
	var v struct {
		Member bool   `json:"member"`
		UserID string `json:"user_id"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("%w: control plane answer: %w", ErrInvalid, err)
	}
	if !v.Member || v.UserID == "" {
		return "", fmt.Errorf("%w: not a member of this tenant", ErrInvalid)
	}
	return v.UserID, nil
}

func (s *Sessions) cached(key [sha256.Size]byte) (verdict, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.cache[key]
	if !ok || !s.now().Before(v.expires) {
		return verdict{}, false
	}
	return v, true
}

// keep caches v, making room when the cache is full: the expired
// verdicts first, then arbitrary ones (at most a tenth of the cache).
func (s *Sessions) keep(key [sha256.Size]byte, v verdict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cache) >= MaxSessionEntries {
		now := s.now()
		for k, old := range s.cache {
			if !now.Before(old.expires) {
				delete(s.cache, k)
			}
		}
		for k := range s.cache {
			if len(s.cache) < MaxSessionEntries*9/10 {
				break
			}
			delete(s.cache, k)
		}
	}
	s.cache[key] = v
}
