package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TokenPrefix starts every workspace token CreateToken mints, so a leaked
// one is easy to recognise (and to scan for). Tokens minted elsewhere (the
// platform's: base64url, no prefix) work the same: only the hash counts.
const TokenPrefix = "pu_"

// prefixLen is how much of a token is kept in clear to tell tokens apart:
// TokenPrefix and 6 characters, 36 bits of the 256.
const prefixLen = len(TokenPrefix) + 6

// TokenInfo describes a stored workspace token, without the token.
type TokenInfo struct {
	// ID is the row's id as text: a number in this service's own schema,
	// a UUID in the platform's.
	ID          string
	WorkspaceID uuid.UUID
	Prefix      string
	CreatedAt   time.Time
	LastUsedAt  *time.Time
	RevokedAt   *time.Time
}

// ErrTokenNotFound is returned by RevokeToken when no live token matches.
var ErrTokenNotFound = errors.New("auth: no such live token")

// NewToken returns a fresh random workspace token (256 bits).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashToken is the stored form of a token.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// CreateToken makes a token for workspaceID, stores its hash and returns
// the token. The token cannot be recovered later.
func CreateToken(ctx context.Context, db DB, workspaceID uuid.UUID) (string, TokenInfo, error) {
	tok, err := NewToken()
	if err != nil {
		return "", TokenInfo{}, err
	}
	info := TokenInfo{WorkspaceID: workspaceID, Prefix: tok[:prefixLen]}
	err = db.QueryRow(ctx, `
		INSERT INTO workspace_auth_tokens (token_hash, workspace_id, prefix)
		VALUES ($1, $2, $3) RETURNING id::text, created_at`,
		HashToken(tok), workspaceID, info.Prefix).Scan(&info.ID, &info.CreatedAt)
	if err != nil {
		return "", TokenInfo{}, fmt.Errorf("create token: %w", err)
	}
	return tok, info, nil
}

// RevokeToken revokes the live tokens of workspaceID matching which: a
// token ID or a prefix as ListTokens shows them, or the token itself (one
// statement, whatever the table's id type). It returns how many it
// revoked, or ErrTokenNotFound for none.
func RevokeToken(ctx context.Context, db DB, workspaceID uuid.UUID, which string) (int, error) {
	if which == "" {
		return 0, ErrTokenNotFound
	}
	tag, err := db.Exec(ctx, `
		UPDATE workspace_auth_tokens SET revoked_at = now()
		WHERE workspace_id = $2 AND revoked_at IS NULL
		  AND (id::text = lower($1) OR prefix = $1 OR token_hash = $3)`, which, workspaceID, HashToken(which))
	if err != nil {
		return 0, fmt.Errorf("revoke token: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return 0, ErrTokenNotFound
	}
	return int(tag.RowsAffected()), nil
}

// ListTokens lists the tokens of workspaceID (every workspace for
// uuid.Nil), newest first, at most limit (1..1000).
func ListTokens(ctx context.Context, db DB, workspaceID uuid.UUID, limit int) ([]TokenInfo, error) {
	limit = min(max(limit, 1), 1000)
	rows, err := db.Query(ctx, `
		SELECT id::text, workspace_id, prefix, created_at, last_used_at, revoked_at
		FROM workspace_auth_tokens
		WHERE $1::uuid = '00000000-0000-0000-0000-000000000000' OR workspace_id = $1
		ORDER BY created_at DESC, id::text DESC LIMIT $2`, workspaceID, limit)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TokenInfo, error) {
		var t TokenInfo
		err := r.Scan(&t.ID, &t.WorkspaceID, &t.Prefix, &t.CreatedAt, &t.LastUsedAt, &t.RevokedAt)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}
