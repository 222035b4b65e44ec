package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"

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
// from what the request presents, TokenIdentity for programs without a
// request (AdminIdentity for tests), Found from a bearer's: its fields are
// unexported, so no other package can assemble one, and the zero value
// (or nil) names no credential and is refused by Check before any I/O.
// An Identity is never changed once made, and so is safe for concurrent
// use.
type Identity struct {
	kind Kind
	// tokenPrefix is a token's first characters, safe to log: set for the
	// admin ("admin") and for a bearer found.
	tokenPrefix string
	// workspaceID is a workspace token's workspace.
	workspaceID uuid.UUID
	// userID is a session's user, as the control plane named it.
	userID string

	hash []byte // a bearer's SHA-256
	// settled is set only here, by AdminIdentity and Identify's session:
	// an Identity of a trusted kind not made so is never trusted (see
	// Trusted).
	settled bool
}

// AdminIdentity is the admin's identity, as Identify makes it for the
// admin token, for tests that act as the admin. No code outside this
// package calls it (TestAdminIdentityOnlyInAuth): a program that needs
// an authority gets one of its own, narrow and named for it.
func AdminIdentity() *Identity { return &Identity{kind: Admin, tokenPrefix: "admin", settled: true} }

// TokenIdentity is the identity of a bearer token still to be looked up
// (Kind Bearer).
func TokenIdentity(token string) *Identity {
	sum := sha256.Sum256([]byte(token))
	return &Identity{kind: Bearer, hash: sum[:]}
}

// Kind is the kind of credential id presents (0 for nil).
func (id *Identity) Kind() Kind {
	if id == nil {
		return 0
	}
	return id.kind
}

// TokenPrefix is a token's first characters, safe to log: the admin's
// ("admin") and a found bearer's; "" otherwise.
func (id *Identity) TokenPrefix() string {
	if id == nil {
		return ""
	}
	return id.tokenPrefix
}

// WorkspaceID is a workspace token's workspace (uuid.Nil for any other).
func (id *Identity) WorkspaceID() uuid.UUID {
	if id == nil {
		return uuid.Nil
	}
	return id.workspaceID
}

// UserID is a session's user, as the control plane named it.
func (id *Identity) UserID() string {
	if id == nil {
		return ""
	}
	return id.userID
}

// TokenHash is a bearer's SHA-256 (the stored form of its token), nil for
// an identity without a bearer (a session).
func (id *Identity) TokenHash() []byte {
	if id == nil {
		return nil
	}
	return id.hash
}

// Found is the identity of id's bearer token as its look-up found it: a
// new identity of kind (Workspace or Org), on workspaceID (a workspace
// token's), named by the token's prefix, with id's hash. id is unchanged.
func (id *Identity) Found(kind Kind, workspaceID uuid.UUID, prefix string) *Identity {
	return &Identity{kind: kind, tokenPrefix: prefix, workspaceID: workspaceID, hash: id.TokenHash()}
}

// Trusted reports whether the identity was settled outside the database
// (the admin, a session) by this package (AdminIdentity, Identify) and
// may act on every workspace: its calls carry no token check. A nil
// Identity, or one not made so, is never trusted, whatever its Kind.
func (id *Identity) Trusted() bool {
	return id != nil && id.settled && (id.kind == Admin || id.kind == Session)
}

// LogAttrs are the identity's log fields: the credential's kind and its
// safe name (a token's prefix, a session's user id); never a secret.
func (id *Identity) LogAttrs() []any {
	attrs := []any{"credential", id.Kind().String()}
	if p := id.TokenPrefix(); p != "" {
		attrs = append(attrs, "token_prefix", p)
	}
	if u := id.UserID(); u != "" {
		attrs = append(attrs, "user_id", u)
	}
	return attrs
}

// LogValue logs a Kind by its name (slog.LogValuer).
func (k Kind) LogValue() slog.Value { return slog.StringValue(k.String()) }

// Credential is an identity as a store's check of it reads it (Check): in
// plain values, which cannot be handed back as an Identity.
type Credential struct {
	// Trusted: settled outside the database (Identity.Trusted); no token
	// to check, TokenHash nil.
	Trusted bool
	// Bearer: a token still to be looked up (Kind Bearer); Found is
	// where its look-up records what it found.
	Bearer bool
	// TokenHash is the token's SHA-256 (32 bytes) when not Trusted.
	TokenHash []byte
	// Found is, for a Bearer, the request's record of its look-up (the
	// one NewContext put in the context; without one, a record of this
	// call alone): the store fills it in.
	Found *Found
}

// Check returns what a store needs to check id on a call that names
// workspace ws (nil: a call that names none), refusing before any I/O
// what can act on no workspace whatever the database says: nil, an
// identity no function here made (a kind that names no credential, a
// trusted kind not settled here), a token-backed one without its token's
// hash (ErrInvalid); and a workspace token's identity for another
// workspace (ErrNotAllowed).
func (id *Identity) Check(ctx context.Context, ws *uuid.UUID) (Credential, error) {
	switch {
	case id == nil:
		return Credential{}, fmt.Errorf("%w: no identity", ErrInvalid)
	case id.Trusted():
		return Credential{Trusted: true}, nil
	case id.kind != Bearer && id.kind != Workspace && id.kind != Org:
		return Credential{}, fmt.Errorf("%w: a %s identity not settled by auth", ErrInvalid, id.kind)
	case len(id.hash) != sha256.Size:
		return Credential{}, fmt.Errorf("%w: a %s identity without its token's hash", ErrInvalid, id.kind)
	case id.kind == Workspace && ws != nil && id.workspaceID != *ws:
		return Credential{}, ErrNotAllowed
	}
	c := Credential{Bearer: id.kind == Bearer, TokenHash: id.hash}
	if c.Bearer {
		c.Found = &Found{}
		if rec, _ := ctx.Value(ctxKey{}).(*caller); rec != nil {
			c.Found = &rec.found
		}
	}
	return c, nil
}

// Found is what a store's look-up of a bearer found (Credential.Found): a
// live token of Kind (Workspace or Org), on WorkspaceID (a workspace
// token's), named TokenPrefix; Kind 0 while none was found. Stamp, when
// set, stamps the token's last_used_at once the request is answered
// (TakeStamp). One request's, written and read by its goroutine.
type Found struct {
	Kind        Kind
	WorkspaceID uuid.UUID
	TokenPrefix string
	Stamp       func(context.Context)
}

// A request's context carries who the request acts as (NewContext): the
// identity it presented and the record of its bearer's look-up (Found),
// which the store writes (Check hands it over). The presented identity is
// never changed.
type ctxKey struct{}

// caller is a request's record of who it acts as.
type caller struct {
	presented *Identity
	found     Found
}

// NewContext returns ctx carrying id as the identity its request
// presented, and a record for the look-up of its bearer (FoundIn).
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, &caller{presented: id})
}

// FoundIn is the record of the look-up of the bearer of ctx's request
// (NewContext's), which a store call fills in: nil without one.
func FoundIn(ctx context.Context) *Found {
	if c, _ := ctx.Value(ctxKey{}).(*caller); c != nil {
		return &c.found
	}
	return nil
}

// FromContext returns who the request of ctx acts as: the identity a
// look-up found (a new value, Found), else the one NewContext put there;
// nil without one. Its Kind is Bearer only while no look-up found a live
// token.
func FromContext(ctx context.Context) *Identity {
	c, _ := ctx.Value(ctxKey{}).(*caller)
	if c == nil {
		return nil
	}
	if c.found.Kind != 0 {
		return c.presented.Found(c.found.Kind, c.found.WorkspaceID, c.found.TokenPrefix)
	}
	return c.presented
}

// TakeStamp returns the stamp a look-up recorded in ctx, once (nil: none
// due).
func TakeStamp(ctx context.Context) func(context.Context) {
	c, _ := ctx.Value(ctxKey{}).(*caller)
	if c == nil {
		return nil
	}
	stamp := c.found.Stamp
	c.found.Stamp = nil
	return stamp
}
