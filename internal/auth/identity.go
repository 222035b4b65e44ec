package auth

import (
	"context"
	"crypto/sha256"
	"sync"

	"github.com/google/uuid"
)

// Kind is the kind of credential an Identity presents.
type Kind uint8

const (
	// Bearer is a bearer token that is not the admin's, as presented: a
	// workspace token, an org token, or nothing at all. The store looks
	// it up (in the round trip of the call it serves, or on its own with
	// Store.Verify) and returns a new identity of kind Workspace or Org
	// (Found), or refuses it; the Bearer identity itself never changes.
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

// Identity is who one request acts as. Authenticator.Identify makes it
// from what the request presents; the look-up of a bearer token makes
// another (Found). An Identity is never changed once made, and so is safe
// for concurrent use.
type Identity struct {
	Kind Kind
	// TokenPrefix is a token's first characters, safe to log: set for the
	// admin ("admin") and once a bearer was found.
	TokenPrefix string
	// WorkspaceID is a workspace token's workspace.
	WorkspaceID uuid.UUID
	// UserID is a session's user, as the control plane named it.
	UserID string

	hash []byte // a bearer's SHA-256
	// settled is set only here, by AdminIdentity and Identify's session:
	// an Identity assembled elsewhere, whatever its Kind, is never
	// trusted (see Trusted).
	settled bool
}

// AdminIdentity is the admin's identity, for programs that act with the
// platform's authority without a request (tests, tools).
func AdminIdentity() *Identity { return &Identity{Kind: Admin, TokenPrefix: "admin", settled: true} }

// TokenIdentity is the identity of a bearer token still to be looked up
// (Kind Bearer).
func TokenIdentity(token string) *Identity {
	sum := sha256.Sum256([]byte(token))
	return &Identity{Kind: Bearer, hash: sum[:]}
}

// TokenHash is a bearer's SHA-256 (the stored form of its token), nil for
// an identity without a bearer (a session).
func (id *Identity) TokenHash() []byte { return id.hash }

// Found is the identity of id's bearer token as its look-up found it: a
// new identity of kind (Workspace or Org), on workspaceID (a workspace
// token's), named by the token's prefix, with id's hash. id is unchanged.
func (id *Identity) Found(kind Kind, workspaceID uuid.UUID, prefix string) *Identity {
	return &Identity{Kind: kind, TokenPrefix: prefix, WorkspaceID: workspaceID, hash: id.hash}
}

// Trusted reports whether the identity was settled outside the database
// (the admin, a session) by this package (AdminIdentity, Identify) and
// may act on every workspace: its calls carry no token check. A nil
// Identity, or one assembled outside this package, is never trusted,
// whatever its Kind.
func (id *Identity) Trusted() bool {
	return id != nil && id.settled && (id.Kind == Admin || id.Kind == Session)
}

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

// A request's context carries who the request acts as (NewContext): the
// identity it presented and, once the store looked a bearer up, the
// identity found, with the stamp of the token's last_used_at when one is
// due. The presented identity is never changed; the one found is a new
// value beside it.
type ctxKey struct{}

// caller is a request's record of who it acts as.
type caller struct {
	presented *Identity

	mu    sync.Mutex
	found *Identity
	stamp func(context.Context)
}

// NewContext returns ctx carrying id as the identity its request
// presented.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, &caller{presented: id})
}

// FromContext returns who the request of ctx acts as: the identity a
// look-up found (RecordFound), else the one NewContext put there; nil
// without one. Its Kind is Bearer only while no look-up has run.
func FromContext(ctx context.Context) *Identity {
	c, _ := ctx.Value(ctxKey{}).(*caller)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.found != nil {
		return c.found
	}
	return c.presented
}

// RecordFound records, in a context NewContext made, the identity the
// look-up of the request's bearer found (refused or not), and stamp, the
// stamp of its token's last_used_at when one is due (nil: none), to run
// once the request is answered (TakeStamp). Without such a context it does
// nothing.
func RecordFound(ctx context.Context, found *Identity, stamp func(context.Context)) {
	c, _ := ctx.Value(ctxKey{}).(*caller)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.found = found
	if stamp != nil {
		c.stamp = stamp
	}
}

// TakeStamp returns the stamp RecordFound recorded in ctx, once (nil:
// none due).
func TakeStamp(ctx context.Context) func(context.Context) {
	c, _ := ctx.Value(ctxKey{}).(*caller)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	stamp := c.stamp
	c.stamp = nil
	return stamp
}
