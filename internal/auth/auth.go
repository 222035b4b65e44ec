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
	"github.com/jackc/pgx/v5"

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
	WorkspaceID uuid.UUID // the token's workspace; zero for the admin
	TokenPrefix string    // safe to log
}

// Allows reports whether p may act on workspaceID (by UUID value).
func (p Principal) Allows(workspaceID uuid.UUID) bool {
	return p.Admin || p.WorkspaceID == workspaceID
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

// Authenticate identifies the bearer of r: ErrMissing without a bearer
// token, ErrInvalid for a token that is neither the admin's nor a live
// workspace token, ErrUnavailable when the token store cannot answer. A
// workspace token's last_used_at is stamped, at most once a minute.
func (a *Authenticator) Authenticate(ctx context.Context, r *http.Request) (Principal, error) {
	tok := BearerToken(r)
	if tok == "" {
		return Principal{}, ErrMissing
	}
	// Hash first, then compare fixed-size digests in constant time: the
	// comparison leaks nothing about the admin token, not even its length.
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], a.adminHash[:]) == 1 {
		return Principal{Admin: true, TokenPrefix: "admin"}, nil
	}
	if len(tok) > MaxTokenBytes {
		return Principal{}, ErrInvalid
	}
	// Any bearer is looked up by its hash: tokens the platform minted have
	// no prefix of ours. The index compares digests, never tokens.
	var p Principal
	var fresh bool
	err := a.db.QueryRow(ctx, `
		SELECT workspace_id, prefix, coalesce(last_used_at > now() - interval '1 minute', false)
		FROM workspace_auth_tokens
		WHERE token_hash = $1 AND revoked_at IS NULL`, sum[:]).Scan(&p.WorkspaceID, &p.TokenPrefix, &fresh)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrInvalid
	}
	if err != nil {
		if pendinguploads.IsUnavailable(err) {
			return Principal{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	if !fresh {
		// Best-effort, at most once a minute, and never waiting: a row
		// locked by someone else is skipped, and a failure (a read-only
		// replica) is logged, not answered.
		if _, err := a.db.Exec(ctx, `
			UPDATE workspace_auth_tokens SET last_used_at = now()
			WHERE ctid = (SELECT ctid FROM workspace_auth_tokens WHERE token_hash = $1 FOR NO KEY UPDATE SKIP LOCKED)`, sum[:]); err != nil {
			a.logger().Warn("last_used_at not stamped", "token_prefix", p.TokenPrefix, "err", err)
		}
	}
	return p, nil
}
