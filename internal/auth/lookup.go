package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the token look-ups and token management need: a pool or a
// connection.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Errors of a bearer's look-up. HTTP answers both with the same 401: a
// caller learns nothing of whose token it holds.
var (
	// ErrInvalid: no live token has this hash (unknown, revoked,
	// expired), or a bearer too long to be any.
	ErrInvalid = errors.New("auth: invalid token")
	// ErrNotAllowed: a live token that may not act on the workspace the
	// call names: another workspace's token, or an org token anchored to
	// another org.
	ErrNotAllowed = errors.New("auth: token not allowed for this workspace")
	// ErrSchemaChanged wraps a look-up's error when the tables it read
	// changed under it (SchemaChanged): the database is there but the
	// call cannot be checked now; a retry can (HTTP answers 503).
	ErrSchemaChanged = errors.New("auth: token tables changed")
)

// Tokens looks bearer tokens up in the database: the workspace tokens
// (workspace_auth_tokens), and the platform's org API tokens
// (org_api_tokens) where the database has them. It is safe for concurrent
// use.
//
// Which tables exist is read once, at the first look-up that needs it
// (one round trip in the life of a process): the service alone has no
// org_api_tokens, and then org tokens simply do not exist. A database
// that gains the table later is seen by processes started after. One
// that loses it (a platform migration renames it) is seen at once: the
// statement that meets the missing relation fails, SchemaChanged drops
// what was read, and the next look-up reads it again (workspace tokens
// go on working; org tokens are then unknown, refused).
type Tokens struct {
	db DB
	// Logger receives what does not fail a request: a stamp that could
	// not be written, an anchor spelling that cannot be checked (default
	// slog.Default()).
	Logger *slog.Logger

	mu     sync.Mutex             // held while the schema is read
	schema atomic.Pointer[schema] // nil until read
}

// NewTokens returns the look-ups over db. It does no I/O.
func NewTokens(db DB) *Tokens { return &Tokens{db: db} }

func (t *Tokens) logger() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}

// schema is what the database offers the look-ups.
type schema struct {
	// orgTokens: org_api_tokens and workspaces (the org trees) exist.
	orgTokens bool
	// uuidv5: pgcrypto's digest() is callable, so an anchor that holds
	// the control plane's org UUID can be matched to its org root (UUID
	// v5 of it). Without it such anchors match nothing (fail closed).
	uuidv5 bool
}

// readSchema returns the schema, reading it on first use.
func (t *Tokens) readSchema(ctx context.Context) (schema, error) {
	if s := t.schema.Load(); s != nil {
		return *s, nil // every request after the first: no lock
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.schema.Load(); s != nil {
		return *s, nil
	}
	var s schema
	err := t.db.QueryRow(ctx, `
		SELECT to_regclass('org_api_tokens') IS NOT NULL AND to_regclass('workspaces') IS NOT NULL,
		       to_regprocedure('digest(bytea,text)') IS NOT NULL`).Scan(&s.orgTokens, &s.uuidv5)
	if err != nil {
		return schema{}, fmt.Errorf("token tables: %w", err)
	}
	if s.orgTokens && !s.uuidv5 {
		t.logger().Warn("org tokens anchored by the control plane's org UUID cannot be checked without pgcrypto's digest(); they are refused",
			"fix", "CREATE EXTENSION pgcrypto")
	}
	t.schema.Store(&s)
	return s, nil
}

// SchemaChanged reports whether err (a statement's, carrying a look-up or
// a guard) says that a relation, column or function it named is gone
// (SQLSTATE 42P01, 42703, 42883): then the schema read before is
// forgotten, to be read again by the next look-up, and the caller answers
// as for an unavailable database (a retry runs with the schema as it is
// now). Other errors leave it alone.
func (t *Tokens) SchemaChanged(err error) bool {
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

// Check is the check of one call's identity for one workspace, in the
// call's own round trip: Queue adds the bearer's look-up to the call's
// batch, every statement that reads or writes a file carries Guard (with
// Arg bound), and Settle, after the batch ran, completes the identity or
// refuses it. A statement guarded so acts only for an identity allowed on
// the workspace, so a refused bearer reads and stores nothing even though
// its look-up runs beside the work.
type Check struct {
	id     *Identity
	ws     uuid.UUID
	schema schema
	queued bool
	found  *found
}

// found is a look-up's row.
type found struct {
	table       string
	workspaceID *uuid.UUID
	prefix      string
	stale       bool
	allowed     bool
}

// For returns the check of id for a call on workspace ws. Its error
// (reading the schema, once per process) means the database cannot be
// asked: the call must fail closed.
func (t *Tokens) For(ctx context.Context, id *Identity, ws uuid.UUID) (*Check, error) {
	c := &Check{id: id, ws: ws}
	if id.Trusted() {
		return c, nil
	}
	s, err := t.readSchema(ctx)
	if err != nil {
		return nil, err
	}
	c.schema = s
	return c, nil
}

// Arg is the value to bind to Guard's hash parameter: the bearer's
// SHA-256, or nil (SQL NULL) for a trusted identity.
func (c *Check) Arg() []byte {
	if c.id.Trusted() {
		return nil
	}
	return c.id.hash
}

// Guard is the SQL condition, over the parameters numbered hashArg (bound
// to Arg) and wsArg (the workspace), that holds for a trusted identity or
// a live token allowed on that workspace.
func (c *Check) Guard(hashArg, wsArg int) string {
	g := fmt.Sprintf(`($%[1]d::bytea IS NULL OR EXISTS (
		SELECT 1 FROM workspace_auth_tokens tok
		WHERE tok.token_hash = $%[1]d AND tok.revoked_at IS NULL AND tok.workspace_id = $%[2]d::uuid)`, hashArg, wsArg)
	if c.schema.orgTokens {
		g += " OR " + c.schema.orgAllowed(hashArg, wsArg)
	}
	return g + ")"
}

// orgAllowed is the SQL condition that a live org token of hash $h may
// act on workspace $w: unanchored, or anchored (org_id) to a workspace of
// the same org (org roots compared, following parent_id up from each, at
// most 64 levels), or to the control plane's org UUID whose UUID v5 is the
// org root's id. Each walk starts from one row found by its primary key,
// so the planner's estimate stays small (a large one would have Postgres
// JIT-compile the statement: half a second, every time).
func (s schema) orgAllowed(h, w int) string {
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
		    WHERE token_hash = $%[1]d AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
		), ws_up(id, parent_id, depth) AS (
		    SELECT id, parent_id, 0 FROM workspaces WHERE id = $%[2]d::uuid
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
func (s schema) lookupSQL() string {
	q := `
		SELECT 'workspace_auth_tokens', workspace_id, prefix, coalesce(last_used_at <= now() - interval '1 minute', true),
		       $2::uuid IS NULL OR workspace_id = $2::uuid
		FROM workspace_auth_tokens WHERE token_hash = $1 AND revoked_at IS NULL`
	if s.orgTokens {
		q += `
		UNION ALL
		SELECT 'org_api_tokens', NULL::uuid, prefix, coalesce(last_used_at <= now() - interval '1 minute', true),
		       $2::uuid IS NULL OR ` + s.orgAllowed(1, 2) + `
		FROM org_api_tokens
		WHERE token_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`
	}
	return q + `
		LIMIT 1`
}

// Queue adds the bearer's look-up to b, unless the identity needs none:
// trusted, or found by an earlier round trip of the same call.
func (c *Check) Queue(b *pgx.Batch) {
	if c.id.Kind != Bearer {
		return
	}
	c.queue(b, &c.ws)
}

func (c *Check) queue(b *pgx.Batch, ws *uuid.UUID) {
	c.queued = true
	b.Queue(c.schema.lookupSQL(), c.id.hash, ws).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			f := &found{}
			if err := rows.Scan(&f.table, &f.workspaceID, &f.prefix, &f.stale, &f.allowed); err != nil {
				return err
			}
			c.found = f
		}
		return rows.Err()
	})
}

// Settle completes the identity from the look-up the batch ran, and
// returns its verdict: nil, ErrInvalid or ErrNotAllowed.
func (c *Check) Settle() error {
	if !c.queued {
		if c.id.Kind == Workspace && c.id.WorkspaceID != c.ws {
			return ErrNotAllowed
		}
		return nil
	}
	return c.settle()
}

func (c *Check) settle() error {
	f := c.found
	if f == nil {
		return ErrInvalid
	}
	id := c.id
	// last_used_at moves only for a token accepted for this call: a
	// refused one (probing) must not look like use in the audit trail.
	id.TokenPrefix, id.table, id.stale = f.prefix, f.table, f.stale && f.allowed
	if f.workspaceID != nil {
		id.Kind, id.WorkspaceID = Workspace, *f.workspaceID
	} else {
		id.Kind = Org
	}
	if !f.allowed {
		return ErrNotAllowed
	}
	return nil
}

// Verify looks id up on its own, one round trip, unless it needs no
// look-up (trusted, or found already): for a call that must know before
// it acts outside the database (writes to the bucket), and for a refusal
// given before any store call. ws is the workspace the call names, or nil
// for none. It returns ErrInvalid or ErrNotAllowed, or the database's
// error (the caller answers 503).
func (t *Tokens) Verify(ctx context.Context, id *Identity, ws *uuid.UUID) error {
	if id.Kind != Bearer {
		if id.Kind == Workspace && ws != nil && id.WorkspaceID != *ws {
			return ErrNotAllowed
		}
		return nil
	}
	c, err := t.For(ctx, id, uuid.Nil) // the look-up itself takes ws
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	c.queue(b, ws)
	if err := t.db.SendBatch(ctx, b).Close(); err != nil {
		if t.SchemaChanged(err) {
			return fmt.Errorf("token look-up: %w: %w", ErrSchemaChanged, err)
		}
		return fmt.Errorf("token look-up: %w", err)
	}
	return c.settle()
}

// StampIfDue sets a found token's last_used_at when its look-up said it
// is due (at most once a minute): best-effort, and never waiting (a row
// locked by someone else is skipped); a failure (a read-only replica) is
// logged, not answered.
func (t *Tokens) StampIfDue(ctx context.Context, id *Identity) {
	if id == nil || !id.stale || id.hash == nil {
		return
	}
	id.stale = false
	var q string
	switch id.table {
	case "workspace_auth_tokens":
		q = `UPDATE workspace_auth_tokens SET last_used_at = now()
			WHERE ctid = (SELECT ctid FROM workspace_auth_tokens WHERE token_hash = $1 FOR NO KEY UPDATE SKIP LOCKED)`
	case "org_api_tokens":
		q = `UPDATE org_api_tokens SET last_used_at = now()
			WHERE ctid = (SELECT ctid FROM org_api_tokens WHERE token_hash = $1 FOR NO KEY UPDATE SKIP LOCKED)`
	default:
		return
	}
	if _, err := t.db.Exec(ctx, q, id.hash); err != nil {
		t.logger().Warn("last_used_at not stamped", "token_prefix", id.TokenPrefix, "err", err)
	}
}
