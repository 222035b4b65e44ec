package pendinguploads

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/auth"
)

// tokens is the SQL of bearer tokens: the workspace tokens
// (workspace_auth_tokens), and the platform's org API tokens
// (org_api_tokens) where the database has them. auth.Identify says who
// presents which token; this is where a token is found and where the
// condition that it may act on a workspace is written. It is safe for
// concurrent use.
//
// Which tables and columns exist is read at the first look-up that needs
// it, and again at the first look-up after TokenTablesMaxAge (one round
// trip a process every 30 s at most, taken by one request while the
// others go on with what was read): the service alone has no
// org_api_tokens, and then org tokens simply do not exist. Org tokens
// are checked only while every column their look-up names exists; with
// one missing (renamed away, or a platform database older than its
// org_id or expires_at migration) they are refused, and workspace tokens,
// whose look-up then leaves the org tables out, work as before. A table
// or column that comes back is seen within TokenTablesMaxAge, no restart.
// One that goes is seen at once: the statement that meets the missing
// relation or column fails, schemaChanged drops what was read, and the
// next look-up reads it again.
type tokens struct {
	db     DB
	logger func() *slog.Logger
	now    func() time.Time // the Store's clock: the schema's age

	mu     sync.Mutex                  // held while the schema is read
	schema atomic.Pointer[tokenSchema] // nil until read
}

// TokenTablesMaxAge bounds how long a process goes on with the token
// tables and columns it read: a table or column a platform migration
// brings back is used again within it. A re-read is one catalog query.
const TokenTablesMaxAge = 30 * time.Second

// tokenSchema is what the database offers the look-ups.
type tokenSchema struct {
	// orgTokens: org_api_tokens and workspaces (the org trees) exist with
	// every column the org look-up names (orgColumns).
	orgTokens bool
	// uuidv5: pgcrypto's digest() is callable, so an anchor that holds
	// the control plane's org UUID can be matched to its org root (UUID
	// v5 of it). Without it such anchors match nothing (fail closed).
	uuidv5 bool
	// missing names the org look-up's columns that do not exist, where
	// org_api_tokens does (for the log).
	missing []string
	readAt  time.Time
}

// orgColumns are the columns the org look-up (orgAllowedSQL, lookupSQL,
// stamp) names, table.column.
const orgColumns = `{org_api_tokens.token_hash,org_api_tokens.prefix,org_api_tokens.last_used_at,
	org_api_tokens.revoked_at,org_api_tokens.org_id,org_api_tokens.expires_at,workspaces.id,workspaces.parent_id}`

// readSchema returns the schema, reading it on first use and when it is
// older than TokenTablesMaxAge. Its error means the database cannot be
// asked: the call fails closed.
func (t *tokens) readSchema(ctx context.Context) (tokenSchema, error) {
	old := t.schema.Load()
	if old != nil && t.now().Sub(old.readAt) < TokenTablesMaxAge {
		return *old, nil // nearly every request: no lock
	}
	if old == nil {
		t.mu.Lock()
	} else if !t.mu.TryLock() {
		return *old, nil // another request is reading it
	}
	defer t.mu.Unlock()
	if s := t.schema.Load(); s != nil && t.now().Sub(s.readAt) < TokenTablesMaxAge {
		return *s, nil
	}
	s := tokenSchema{readAt: t.now()}
	var orgTable bool
	err := t.db.QueryRow(ctx, `
		SELECT to_regclass('org_api_tokens') IS NOT NULL,
		       array(SELECT c FROM unnest($1::text[]) AS c WHERE NOT EXISTS (
		           SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(split_part(c, '.', 1))
		             AND attname = split_part(c, '.', 2) AND attnum > 0 AND NOT attisdropped)),
		       to_regprocedure('digest(bytea,text)') IS NOT NULL`, orgColumns).Scan(&orgTable, &s.missing, &s.uuidv5)
	if err != nil {
		return tokenSchema{}, wrap("token check: token tables", err)
	}
	s.orgTokens = len(s.missing) == 0
	if !orgTable {
		s.missing = nil // the service alone: no org tokens, nothing to say
	}
	t.logChange(old, s)
	t.schema.Store(&s)
	return s, nil
}

// logChange warns, when s differs from what was read before (old, nil for
// nothing), of what keeps org tokens from being checked.
func (t *tokens) logChange(old *tokenSchema, s tokenSchema) {
	if old != nil && old.orgTokens == s.orgTokens && old.uuidv5 == s.uuidv5 && slices.Equal(old.missing, s.missing) {
		return
	}
	if len(s.missing) > 0 {
		t.logger().Warn("org tokens are refused: org_api_tokens lacks a column their look-up names; workspace tokens are unaffected",
			"missing", s.missing)
	}
	if s.orgTokens && !s.uuidv5 {
		t.logger().Warn("org tokens anchored by the control plane's org UUID cannot be checked without pgcrypto's digest(); they are refused",
			"fix", "CREATE EXTENSION pgcrypto")
	}
}

// schemaChanged reports whether err (a statement's, carrying a look-up or
// a guard) says that a relation, column or function it named is gone
// (SQLSTATE 42P01, 42703, 42883): then the schema read before is
// forgotten, to be read again by the next look-up, and the caller answers
// as for an unavailable database (a retry runs with the schema as it is
// now). Other errors leave it alone.
func (t *tokens) schemaChanged(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "42P01", "42703", "42883": // undefined_table, undefined_column, undefined_function
	default:
		return false
	}
	if t.schema.Swap(nil) != nil {
		t.logger().Warn("a statement met a relation, column or function that is gone; the token tables are read again at the next look-up",
			"sqlstate", pgErr.Code, "err", err)
	}
	return true
}

// mayActSQL is the SQL condition, over the parameters hash (a bearer's
// SHA-256, or NULL for a trusted identity) and ws (the workspace), that
// holds for a trusted identity or a live token allowed on that workspace.
func (s tokenSchema) mayActSQL(hash, ws string) string {
	g := `(` + hash + `::bytea IS NULL OR EXISTS (
		SELECT 1 FROM workspace_auth_tokens tok
		WHERE tok.token_hash = ` + hash + ` AND tok.revoked_at IS NULL AND tok.workspace_id = ` + ws + `::uuid)`
	if s.orgTokens {
		g += " OR " + s.orgAllowedSQL(hash, ws)
	}
	return g + ")"
}

// orgAllowedSQL is the SQL condition that a live org token of hash $h may
// act on workspace $w: unanchored, or anchored (org_id) to a workspace of
// the same org (org roots compared, following parent_id up from each, at
// most 64 levels), or to the control plane's org UUID whose UUID v5 is the
// org root's id. Each walk starts from one row found by its primary key,
// so the planner's estimate stays small (a large one would have Postgres
// JIT-compile the statement: half a second, every time).
func (s tokenSchema) orgAllowedSQL(h, w string) string {
	v5 := "false"
	if s.uuidv5 {
		// UUID v5 (SHA-1, RFC 4122 URL namespace) of
		// "molecule-platform-agent:" + the org UUID.
		v5 = `r.id = (SELECT encode(set_byte(set_byte(d, 6, (get_byte(d, 6) & 15) | 80), 8, (get_byte(d, 8) & 63) | 128), 'hex')::uuid
		              FROM substring(digest('\x6ba7b8119dad11d180b400c04fd430c8'::bytea
		                  || convert_to('molecule-platform-agent:' || o.org_id::text, 'UTF8'), 'sha1') FROM 1 FOR 16) AS d)`
	}
	return fmt.Sprintf(`EXISTS (
		WITH RECURSIVE o AS (
		    SELECT org_id FROM org_api_tokens
		    WHERE token_hash = %[1]s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
		), ws_up(id, parent_id, depth) AS (
		    SELECT id, parent_id, 0 FROM workspaces WHERE id = %[2]s::uuid
		  UNION ALL
		    SELECT w.id, w.parent_id, u.depth + 1 FROM ws_up u JOIN workspaces w ON w.id = u.parent_id WHERE u.depth < 64
		), anchor_up(id, parent_id, depth) AS (
		    SELECT w.id, w.parent_id, 0 FROM o JOIN workspaces w ON w.id = o.org_id
		  UNION ALL
		    SELECT w.id, w.parent_id, u.depth + 1 FROM anchor_up u JOIN workspaces w ON w.id = u.parent_id WHERE u.depth < 64
		)
		SELECT 1 FROM o
		WHERE o.org_id IS NULL OR EXISTS (
		    SELECT 1 FROM ws_up r WHERE r.parent_id IS NULL
		      AND (%[3]s OR r.id IN (SELECT id FROM anchor_up WHERE parent_id IS NULL))))`,
		h, w, v5)
}

// lookupSQL finds a live token by its hash ($1): where it lives, its
// workspace (a workspace token's), its safe prefix, whether last_used_at
// is due, and whether it may act on workspace $2 (NULL: a call that names
// no workspace, for which any live token will do). The indexes on
// token_hash compare digests, never tokens.
func (s tokenSchema) lookupSQL() string {
	q := `
		SELECT 'workspace_auth_tokens', workspace_id, prefix, coalesce(last_used_at <= now() - interval '1 minute', true),
		       $2::uuid IS NULL OR workspace_id = $2::uuid
		FROM workspace_auth_tokens WHERE token_hash = $1 AND revoked_at IS NULL`
	if s.orgTokens {
		q += `
		UNION ALL
		SELECT 'org_api_tokens', NULL::uuid, prefix, coalesce(last_used_at <= now() - interval '1 minute', true),
		       $2::uuid IS NULL OR ` + s.orgAllowedSQL("$1", "$2") + `
		FROM org_api_tokens
		WHERE token_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`
	}
	return q + `
		LIMIT 1`
}

// lookup is one bearer's look-up, queued in a batch; found is its row
// once the batch ran, nil for no live token.
type lookup struct {
	bearer *auth.Identity
	found  *foundToken
}

// foundToken is a look-up's row.
type foundToken struct {
	table       string
	workspaceID *uuid.UUID
	prefix      string
	stampDue    bool
	allowed     bool
}

// queueLookup adds the look-up of bearer's token, for workspace ws (nil:
// any), to b.
func (s tokenSchema) queueLookup(b *pgx.Batch, bearer *auth.Identity, ws *uuid.UUID) *lookup {
	l := &lookup{bearer: bearer}
	b.Queue(s.lookupSQL(), bearer.TokenHash(), ws).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			f := &foundToken{}
			if err := rows.Scan(&f.table, &f.workspaceID, &f.prefix, &f.stampDue, &f.allowed); err != nil {
				return err
			}
			l.found = f
		}
		return rows.Err()
	})
	return l
}

// verdict is what the look-up, once run, says of its bearer: the identity
// found (a new value; the bearer's own is unchanged), or the refusal
// (auth.ErrInvalid, auth.ErrNotAllowed, with the identity found when the
// token is live, for the logs).
func (l *lookup) verdict() (*auth.Identity, error) {
	f := l.found
	if f == nil {
		return l.bearer, auth.ErrInvalid
	}
	var found *auth.Identity
	if f.workspaceID != nil {
		found = l.bearer.Found(auth.Workspace, *f.workspaceID, f.prefix)
	} else {
		found = l.bearer.Found(auth.Org, uuid.Nil, f.prefix)
	}
	if !f.allowed {
		return found, auth.ErrNotAllowed
	}
	return found, nil
}

// stamp is the stamp of the looked-up token's last_used_at, when its
// look-up said it is due (at most once a minute) and the token was
// accepted (a refused one, probing, must not look like use in the audit
// trail); nil otherwise.
func (t *tokens) stamp(l *lookup) func(context.Context) {
	f := l.found
	if f == nil || !f.stampDue || !f.allowed {
		return nil
	}
	var q string
	switch f.table {
	case "workspace_auth_tokens":
		q = `UPDATE workspace_auth_tokens SET last_used_at = now()
			WHERE ctid = (SELECT ctid FROM workspace_auth_tokens WHERE token_hash = $1 FOR NO KEY UPDATE SKIP LOCKED)`
	case "org_api_tokens":
		q = `UPDATE org_api_tokens SET last_used_at = now()
			WHERE ctid = (SELECT ctid FROM org_api_tokens WHERE token_hash = $1 FOR NO KEY UPDATE SKIP LOCKED)`
	default:
		return nil
	}
	hash, prefix := l.bearer.TokenHash(), f.prefix
	// Best-effort, and never waiting (a row locked by someone else is
	// skipped); a failure (a read-only replica) is logged, not answered.
	return func(ctx context.Context) {
		if _, err := t.db.Exec(ctx, q, hash); err != nil {
			t.logger().Warn("last_used_at not stamped", "token_prefix", prefix, "err", err)
		}
	}
}

// Verify looks id's bearer up on its own, one round trip, unless it needs
// no look-up (trusted, or found already): for a call that must know
// before it acts outside the database, and for a refusal given before any
// store call. ws is the workspace the call names, or nil for none. It
// returns who the call acts as (id itself, or the identity found, a new
// value also recorded in ctx: auth.RecordFound), or auth.ErrInvalid,
// auth.ErrNotAllowed, or the database's error (ErrUnavailable when it is
// down or the token tables changed under the look-up).
func (s *Store) Verify(ctx context.Context, id *auth.Identity, ws *uuid.UUID) (*auth.Identity, error) {
	if id.Kind != auth.Bearer {
		if id.Kind == auth.Workspace && ws != nil && id.WorkspaceID != *ws {
			return id, auth.ErrNotAllowed
		}
		return id, nil
	}
	schema, err := s.tokens.readSchema(ctx)
	if err != nil {
		return id, err
	}
	b := &pgx.Batch{}
	l := schema.queueLookup(b, id, ws)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return id, s.batchError("token look-up", err)
	}
	found, err := l.verdict()
	if l.found != nil {
		auth.RecordFound(ctx, found, s.tokens.stamp(l))
	}
	return found, err
}
