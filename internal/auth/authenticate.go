package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// MaxTokenBytes is the longest bearer token looked up; a longer one is
// ErrInvalid without a query.
const MaxTokenBytes = 512

// Errors of a bearer's look-up (the store's). HTTP answers ErrInvalid and
// ErrNotAllowed with the same 401: a caller learns nothing of whose token
// it holds. ErrUnanchored names the token's own state, to its holder.
var (
	// ErrInvalid: no live token has this hash (unknown, revoked,
	// expired), or a bearer too long to be any.
	ErrInvalid = errors.New("auth: invalid token")
	// ErrNotAllowed: a live token that may not act on the workspace the
	// call names: another workspace's token, or an org token anchored to
	// another org.
	ErrNotAllowed = errors.New("auth: token not allowed for this workspace")
	// ErrUnanchored: a live org token without an anchor workspace
	// (org_api_tokens.org_id NULL: never set, or its anchor deleted), on
	// a deployment that does not keep the platform's legacy rule that
	// such a token acts on every workspace. Its own answer: the token's
	// holder must have it anchored again, not ask for another workspace.
	ErrUnanchored = errors.New("auth: org token without an anchor workspace")
)

// Errors of Identify besides ErrInvalid and ErrSessionUnavailable.
var (
	// ErrMissing: no bearer token (only the Bearer scheme counts), and no
	// session cookie that this deployment checks.
	ErrMissing = errors.New("auth: missing credentials")
	// ErrMissingScheme is ErrMissing when an Authorization header was sent
	// with another scheme than Bearer, or none (a bare token): it wraps
	// ErrMissing, and tells the caller what to add.
	ErrMissingScheme = fmt.Errorf("%w: Authorization without the Bearer scheme", ErrMissing)
	// ErrForeignOrigin: a session cookie on a request that another site's
	// page may have made (cross-site request forgery): the browser does
	// not say Sec-Fetch-Site same-origin, and its Origin is not one of
	// this service's (or, without an Origin, Sec-Fetch-Site is present).
	ErrForeignOrigin = errors.New("auth: session cookie from a foreign origin")
)

// Authenticator identifies the caller of a request. It is safe for
// concurrent use.
type Authenticator struct {
	adminHash [sha256.Size]byte

	// Sessions, when set, lets a request without a bearer act with the
	// control plane's session cookie; nil: cookies are ignored.
	Sessions *Sessions
	// Origins are the pages' origins a cookie-authenticated request may
	// come from: the CORS origins and the service's public origin (from
	// the configuration: behind an edge, Host and X-Forwarded-* cannot
	// tell it).
	Origins []string
}

// NewAuthenticator returns an Authenticator for adminToken (which must not
// be empty). It does no I/O.
func NewAuthenticator(adminToken string) (*Authenticator, error) {
	if adminToken == "" {
		return nil, errors.New("auth: empty admin token")
	}
	return NewAuthenticatorForSHA256(sha256.Sum256([]byte(adminToken))), nil
}

// NewAuthenticatorForSHA256 returns an Authenticator for the admin token
// whose SHA-256 is adminHash (ADMIN_TOKEN_SHA256): the token itself is
// never held, and a bearer is the admin's when its SHA-256 equals it. It
// does no I/O.
func NewAuthenticatorForSHA256(adminHash [sha256.Size]byte) *Authenticator {
	return &Authenticator{adminHash: adminHash}
}

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header, or "" for any other value (another scheme counts as none).
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// Identify tells who r acts as, in the platform's order. A bearer token
// is the admin's (a constant-time compare of digests, no I/O), or a
// Bearer identity whose token is looked up later (by the store call that
// serves the request, or Verify); one too long to be any is ErrInvalid.
// Without a bearer, a Cookie is a session when Sessions is set: a
// request from a foreign origin is ErrForeignOrigin, before the control
// plane is asked; a refused cookie ErrInvalid; a control plane without a
// verdict ErrSessionUnavailable. Otherwise ErrMissing; ErrMissingScheme
// when an Authorization header came with another scheme, or none.
func (a *Authenticator) Identify(r *http.Request) (*Identity, error) {
	if tok := BearerToken(r); tok != "" {
		// Hash first, then compare fixed-size digests in constant time: the
		// comparison leaks nothing about the admin token, not even its length.
		id := TokenIdentity(tok)
		if subtle.ConstantTimeCompare(id.hash, a.adminHash[:]) == 1 {
			return AdminIdentity(), nil
		}
		if len(tok) > MaxTokenBytes {
			return nil, ErrInvalid
		}
		return id, nil
	}
	cookies := r.Header.Values("Cookie")
	if a.Sessions == nil || len(cookies) == 0 {
		if h := r.Header.Get("Authorization"); h != "" {
			if scheme, _, _ := strings.Cut(h, " "); !strings.EqualFold(scheme, "Bearer") {
				return nil, ErrMissingScheme
			}
		}
		return nil, ErrMissing
	}
	if !a.sameSite(r) {
		return nil, ErrForeignOrigin
	}
	userID, err := a.Sessions.Verify(r.Context(), strings.Join(cookies, "; "))
	if err != nil {
		return nil, err
	}
	return &Identity{kind: Session, userID: userID, settled: true}, nil
}

// sameSite reports whether a cookie-carrying request came from one of
// the service's own pages: the browser says Sec-Fetch-Site same-origin
// (a page's script cannot set a Sec-Fetch-* header, so only the browser
// asserts it: a second host name of the same deployment is served as
// well as the first, OWASP's fetch-metadata rule), or its Origin is
// listed, or it has neither an Origin nor Sec-Fetch-Site (not a browser,
// which cannot be made to send a victim's cookie). same-site (a sibling
// tenant), cross-site and none from an unlisted origin are not.
func (a *Authenticator) sameSite(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	if site == "same-origin" {
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" || len(r.Header.Values("Origin")) > 0 {
		return slices.Contains(a.Origins, origin)
	}
	return site == ""
}
