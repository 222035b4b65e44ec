package pendinguploads

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Caller is who a call acts for. The HTTP layer checks the admin's token
// itself (a constant-time compare of digests, no database). A workspace
// token is checked by the call, in the round trip that does the work: its
// batch looks the token up first, and every statement that reads or
// writes files acts only when the token is live and of the workspace the
// call names. A call for an unknown or revoked token (ErrTokenInvalid) or
// another workspace's (ErrTokenNotForWorkspace) reads no file's bytes and
// stores nothing; those errors come before any other.
//
// A nil *Caller is a caller already trusted: the admin, or a test.
type Caller struct {
	// TokenHash is the SHA-256 of the bearer's workspace token; nil for
	// the admin.
	TokenHash []byte

	// Token is what the look-up found, set by the call that made it: nil
	// until then, and for an unknown or revoked token.
	Token *Token
}

// Token is a live workspace token as a call found it.
type Token struct {
	WorkspaceID uuid.UUID
	Prefix      string // safe to log
	// Stale says last_used_at is unset or over a minute old: the caller
	// stamps it, best-effort (see auth.Authenticator.Stamp).
	Stale bool
}

var (
	// ErrTokenInvalid: the bearer's token is not a live workspace token.
	ErrTokenInvalid = errors.New("pendinguploads: unknown or revoked token")
	// ErrTokenNotForWorkspace: a live token of another workspace.
	ErrTokenNotForWorkspace = errors.New("pendinguploads: token of another workspace")
)

// tokenLookupSQL finds a live token by its hash: its workspace, its safe
// prefix, and whether last_used_at needs a stamp. The index on token_hash
// compares digests, never tokens.
const tokenLookupSQL = `
	SELECT workspace_id, prefix, coalesce(last_used_at <= now() - interval '1 minute', true)
	FROM workspace_auth_tokens
	WHERE token_hash = $1 AND revoked_at IS NULL`

// LookupToken looks up a live workspace token by its SHA-256, on its own:
// for the requests that answer before any call of the Store (a refused
// path, a bad body), and for auth's own use. An unknown or revoked token
// is ErrTokenInvalid.
func LookupToken(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, tokenHash []byte) (Token, error) {
	var t Token
	err := db.QueryRow(ctx, tokenLookupSQL, tokenHash).Scan(&t.WorkspaceID, &t.Prefix, &t.Stale)
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, ErrTokenInvalid
	}
	if err != nil {
		return Token{}, wrap("token look-up", err)
	}
	return t, nil
}

// hash is the token hash to bind as the guard's parameter: nil (SQL
// NULL, which the guard lets through) for a trusted caller.
func (c *Caller) hash() []byte {
	if c == nil {
		return nil
	}
	return c.TokenHash
}

// checked reports whether the caller needs no look-up (trusted) or had one.
func (c *Caller) checked() bool {
	return c == nil || c.TokenHash == nil || c.Token != nil
}

// queueLookup queues the token look-up in b and returns what settle
// reads after the batch ran. It queues nothing for a trusted caller, or
// one whose token an earlier round trip of the same call found.
func (c *Caller) queueLookup(b *pgx.Batch) *lookup {
	l := &lookup{c: c}
	if c.checked() {
		return l
	}
	l.queued = true
	b.Queue(tokenLookupSQL, c.TokenHash).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var t Token
			if err := rows.Scan(&t.WorkspaceID, &t.Prefix, &t.Stale); err != nil {
				return err
			}
			l.found = &t
		}
		return rows.Err()
	})
	return l
}

// lookup is a queued token look-up.
type lookup struct {
	c      *Caller
	queued bool
	found  *Token
}

// settle records the look-up on the caller and returns its verdict for
// workspaceID: nil, ErrTokenInvalid or ErrTokenNotForWorkspace.
func (l *lookup) settle(workspaceID uuid.UUID) error {
	if !l.queued {
		return nil
	}
	if l.found == nil {
		return ErrTokenInvalid
	}
	l.c.Token = l.found
	if l.found.WorkspaceID != workspaceID {
		return ErrTokenNotForWorkspace
	}
	return nil
}

// verify looks the caller's token up on its own, unless it was already:
// for a call that must know before it acts outside the database (writes
// objects to the bucket, copies them).
func (s *Store) verify(ctx context.Context, c *Caller, workspaceID uuid.UUID) error {
	if c.checked() {
		if c != nil && c.Token != nil && c.Token.WorkspaceID != workspaceID {
			return ErrTokenNotForWorkspace
		}
		return nil
	}
	t, err := LookupToken(ctx, s.db, c.TokenHash)
	if err != nil {
		return err
	}
	c.Token = &t
	if t.WorkspaceID != workspaceID {
		return ErrTokenNotForWorkspace
	}
	return nil
}

// authorized is the SQL condition, over the parameters $hash and $ws (by
// number), that holds for a trusted caller (hash NULL) or a live token of
// workspace ws: every statement that reads or writes a file carries it.
func authorized(hashArg, wsArg int) string {
	return fmt.Sprintf(`($%[1]d::bytea IS NULL OR EXISTS (
		SELECT 1 FROM workspace_auth_tokens tok
		WHERE tok.token_hash = $%[1]d AND tok.revoked_at IS NULL AND tok.workspace_id = $%[2]d))`, hashArg, wsArg)
}
