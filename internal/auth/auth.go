package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// MaxTokenBytes is the longest bearer token looked up; a longer one is
// ErrInvalid without a query.
const MaxTokenBytes = 512

// Errors of Authenticate; the HTTP layer turns them into API.md's 401 and
// 503 answers (and a token of another workspace, which Principal.Allows
// tells, into the same 401 as ErrInvalid).
var (
	// ErrMissing: no Authorization header with the Bearer scheme.
	ErrMissing = errors.New("auth: missing bearer token")
	// ErrInvalid: a token that is neither the admin's nor a live (known,
	// unrevoked) workspace token.
	ErrInvalid = errors.New("auth: invalid token")
	// ErrUnavailable: the token store could not be reached; wraps the cause.
	ErrUnavailable = errors.New("auth: token store unavailable")
)

// Principal is who a request acts as.
type Principal struct {
	Admin       bool
	WorkspaceID uuid.UUID // the token's workspace, once verified; zero for the admin
	TokenPrefix string    // safe to log; set once verified
	// TokenHash is the SHA-256 of a workspace bearer's token; nil for the
	// admin.
	TokenHash []byte
	// Verified says the token was found live (always true for the admin).
	Verified bool
}

// Allows reports whether p may act on workspaceID (by UUID value): the
// admin, or a verified token of that workspace.
func (p Principal) Allows(workspaceID uuid.UUID) bool {
	return p.Admin || (p.Verified && p.WorkspaceID == workspaceID)
}

// Authenticator checks bearer tokens. It is safe for concurrent use.
type Authenticator struct {
	db        DB
	adminHash [sha256.Size]byte

	// Logger receives warnings that do not fail a request (default
	// slog.Default()).
	Logger *slog.Logger
}

func (a *Authenticator) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// NewAuthenticator returns an Authenticator for adminToken (which must not
// be empty) and the workspace tokens in db.
func NewAuthenticator(db DB, adminToken string) (*Authenticator, error) {
	if adminToken == "" {
		return nil, errors.New("auth: empty admin token")
	}
	return &Authenticator{db: db, adminHash: sha256.Sum256([]byte(adminToken))}, nil
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

// Identify reads the bearer of r without the database: ErrMissing
// without a bearer token; the admin, verified (a constant-time compare of
// digests); ErrInvalid for a token too long to be any; otherwise a
// workspace bearer whose token is still to be checked, by the store call
// that serves the request in the same round trip (pendinguploads.Caller)
// or by Verify.
func (a *Authenticator) Identify(r *http.Request) (Principal, error) {
	tok := BearerToken(r)
	if tok == "" {
		return Principal{}, ErrMissing
	}
	// Hash first, then compare fixed-size digests in constant time: the
	// comparison leaks nothing about the admin token, not even its length.
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], a.adminHash[:]) == 1 {
		return Principal{Admin: true, TokenPrefix: "admin", Verified: true}, nil
	}
	if len(tok) > MaxTokenBytes {
		return Principal{}, ErrInvalid
	}
	// Any bearer is looked up by its hash: tokens the platform minted have
	// no prefix of ours.
	return Principal{TokenHash: sum[:]}, nil
}

// Verify checks an identified bearer on its own, one round trip:
// ErrInvalid for a token that is not a live workspace token, ErrUnavailable
// when the token store cannot answer. It stamps last_used_at when due.
func (a *Authenticator) Verify(ctx context.Context, p Principal) (Principal, error) {
	if p.Verified {
		return p, nil
	}
	t, err := pendinguploads.LookupToken(ctx, a.db, p.TokenHash)
	switch {
	case errors.Is(err, pendinguploads.ErrTokenInvalid):
		return Principal{}, ErrInvalid
	case err != nil && pendinguploads.IsUnavailable(err):
		return Principal{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case err != nil:
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	p.WorkspaceID, p.TokenPrefix, p.Verified = t.WorkspaceID, t.Prefix, true
	if t.Stale {
		a.Stamp(ctx, p)
	}
	return p, nil
}

// Authenticate identifies and verifies the bearer of r: Identify, then
// Verify.
func (a *Authenticator) Authenticate(ctx context.Context, r *http.Request) (Principal, error) {
	p, err := a.Identify(r)
	if err != nil {
		return Principal{}, err
	}
	return a.Verify(ctx, p)
}

// Stamp sets a workspace token's last_used_at: best-effort, due at most
// once a minute (pendinguploads.Token.Stale), and never waiting: a row
// locked by someone else is skipped, and a failure (a read-only replica)
// is logged, not answered.
func (a *Authenticator) Stamp(ctx context.Context, p Principal) {
	if p.TokenHash == nil {
		return
	}
	if _, err := a.db.Exec(ctx, `
		UPDATE workspace_auth_tokens SET last_used_at = now()
		WHERE ctid = (SELECT ctid FROM workspace_auth_tokens WHERE token_hash = $1 FOR NO KEY UPDATE SKIP LOCKED)`, p.TokenHash); err != nil {
		a.logger().Warn("last_used_at not stamped", "token_prefix", p.TokenPrefix, "err", err)
	}
}
