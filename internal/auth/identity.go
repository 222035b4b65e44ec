package auth

import (
	"context"
	"crypto/sha256"

	"github.com/google/uuid"
)

// Kind is the kind of credential an Identity presents.
type Kind uint8

const (
	// Bearer is a bearer token that is not the admin's, not looked up
	// yet: a workspace token, an org token, or nothing at all. A look-up
	// (Check.Settle, Tokens.Verify) turns it into Workspace or Org, or
	// refuses it.
	Bearer Kind = iota + 1
	// Admin is the platform's admin token: every workspace.
	Admin
	// Workspace is a live workspace token: its own workspace only.
	Workspace
	// Org is a live org API token: every workspace of its org.
	Org
	// Session is a control-plane session cookie of a member of this
	// tenant: every workspace.
	Session
)

func (k Kind) String() string {
	switch k {
	case Bearer:
		return "bearer"
	case Admin:
		return "admin"
	case Workspace:
		return "workspace"
	case Org:
		return "org"
	case Session:
		return "session"
	}
	return "none"
}

// Identity is who one request acts as. Authenticator.Identify makes it;
// the look-up of a bearer token completes it in place (Kind, TokenPrefix,
// WorkspaceID). It belongs to its request: not safe for concurrent use.
type Identity struct {
	Kind Kind
	// TokenPrefix is a token's first characters, safe to log: set for the
	// admin ("admin") and once a bearer was found.
	TokenPrefix string
	// WorkspaceID is a workspace token's workspace.
	WorkspaceID uuid.UUID
	// UserID is a session's user, as the control plane named it.
	UserID string

	hash  []byte // a bearer's SHA-256
	table string // where a found bearer lives, for its last_used_at stamp
	stale bool   // its last_used_at is due (unset or over a minute old)
}

// AdminIdentity is the admin's identity, for programs that act with the
// platform's authority without a request (tests, tools).
func AdminIdentity() *Identity { return &Identity{Kind: Admin, TokenPrefix: "admin"} }

// TokenIdentity is the identity of a bearer token still to be looked up
// (Kind Bearer).
func TokenIdentity(token string) *Identity {
	sum := sha256.Sum256([]byte(token))
	return &Identity{Kind: Bearer, hash: sum[:]}
}

// StampDue reports whether a found token's last_used_at is due (see
// Tokens.StampIfDue).
func (id *Identity) StampDue() bool { return id.stale }

// Trusted reports whether the identity was settled outside the database
// (the admin, a session) and may act on every workspace: its calls carry
// no token check.
func (id *Identity) Trusted() bool { return id.Kind == Admin || id.Kind == Session }

// LogAttrs are the identity's log fields: the credential's kind and its
// safe name (a token's prefix, a session's user id); never a secret.
func (id *Identity) LogAttrs() []any {
	attrs := []any{"credential", id.Kind.String()}
	if id.TokenPrefix != "" {
		attrs = append(attrs, "token_prefix", id.TokenPrefix)
	}
	if id.UserID != "" {
		attrs = append(attrs, "user_id", id.UserID)
	}
	return attrs
}

type ctxKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity NewContext put in ctx, or nil.
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(ctxKey{}).(*Identity)
	return id
}
