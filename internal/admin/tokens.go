package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/auth"
)

// The workspace tokens' rows (workspace_auth_tokens): what the admin
// function, pendingctl, the dev server and the tests mint, list and
// revoke. auth makes and hashes a token; the store looks it up.

// DB is what token administration needs: a pool or a connection.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

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
var ErrTokenNotFound = errors.New("admin: no such live token")

// ErrWorkspaceNotFound is returned by CreateToken when the database
// refuses the token's workspace: on the platform's schema,
// workspace_auth_tokens.workspace_id references workspaces (foreign key,
// SQLSTATE 23503). The service's own schema has no workspaces table: any
// UUID is a workspace there.
var ErrWorkspaceNotFound = errors.New("admin: workspace not found")

// CreateToken makes a token for workspaceID, stores its hash and returns
// the token. The token cannot be recovered later.
func CreateToken(ctx context.Context, db DB, workspaceID uuid.UUID) (string, TokenInfo, error) {
	tok, err := auth.NewToken()
	if err != nil {
		return "", TokenInfo{}, err
	}
	info := TokenInfo{WorkspaceID: workspaceID, Prefix: auth.SafePrefix(tok)}
	err = db.QueryRow(ctx, `
		INSERT INTO workspace_auth_tokens (token_hash, workspace_id, prefix)
		VALUES ($1, $2, $3) RETURNING id::text, created_at`,
		auth.HashToken(tok), workspaceID, info.Prefix).Scan(&info.ID, &info.CreatedAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" && pgErr.TableName == "workspace_auth_tokens" {
		return "", TokenInfo{}, fmt.Errorf("create token for %s: %w", workspaceID, ErrWorkspaceNotFound)
	}
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
		  AND (id::text = lower($1) OR prefix = $1 OR token_hash = $3)`, which, workspaceID, auth.HashToken(which))
	if err != nil {
		return 0, fmt.Errorf("revoke token: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return 0, ErrTokenNotFound
	}
	return int(tag.RowsAffected()), nil
}

// ListTokens lists the tokens of workspaceID (every workspace's for nil;
// any UUID, the nil UUID included, is one workspace), newest first, at
// most limit (1..1000).
func ListTokens(ctx context.Context, db DB, workspaceID *uuid.UUID, limit int) ([]TokenInfo, error) {
	limit = min(max(limit, 1), 1000)
	rows, err := db.Query(ctx, `
		SELECT id::text, workspace_id, prefix, created_at, last_used_at, revoked_at
		FROM workspace_auth_tokens
		WHERE $1::uuid IS NULL OR workspace_id = $1
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
