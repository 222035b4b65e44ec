package pendinguploads

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/semaphore"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
)

// access is a caller checked for one workspace: the only value from
// which a statement that reads or writes a workspace's files (its
// pending_uploads and presigned_uploads rows, their objects) is built and
// sent. Only Store.access makes one for a caller, after auth's check of the identity
// (auth.Identity.Check), which refuses before any I/O what cannot act on
// the workspace whatever the database says: none at all, an identity auth
// did not make, a token-backed one without its token's hash, a workspace
// token's identity for another workspace. A nil access, or one no check
// made, is refused wherever it is used (errNoAccess): nil or zero never
// means trusted.
//
// What the database must still confirm (that the token is live and may
// act on the workspace) each statement confirms itself: it names
// callerMayAct in its SQL, over the arguments send binds (args).
type access struct {
	s  *Store
	ws uuid.UUID
	// file, when set, is the one file of ws the access reads: a download
	// link's (Store.linkAccess, the other maker of an access), which
	// fetch, Open and SignGet check (mayRead). uuid.Nil: every file of ws.
	file    uuid.UUID
	trusted bool   // settled outside the database: auth.Identity.Trusted
	hash    []byte // the token's SHA-256; nil only when trusted
	// found is, while the caller's bearer is still to be looked up, where
	// its look-up records what it found (auth.Credential.Found); nil once
	// it ran, and for a caller without a bearer to look up.
	found *auth.Found
	// callerMayAct is the SQL condition, over @caller_trusted,
	// @caller_hash and @workspace, that the caller may act on the
	// workspace: a trusted identity, or a live token allowed on it
	// (tokenSchema.mayActSQL). Every statement built from the access
	// names it.
	callerMayAct string
	schema       tokenSchema // what the look-up of a Bearer reads
}

// mayRead reports whether a reads file: any file of its workspace, or
// its one file (a download link's).
func (a *access) mayRead(file uuid.UUID) bool {
	return a != nil && (a.file == uuid.Nil || a.file == file)
}

// errNoAccess is a statement built from an access no check made: a bug,
// never sent.
var errNoAccess = errors.New("a statement without a checked caller (access)")

// access checks that id may act on workspace ws as far as can be told
// without the database (auth.Identity.Check: its refusal comes before any
// I/O), then returns the access the call's statements are built from and
// sent with. Its only I/O is the read of the token tables (at most every
// TokenTablesMaxAge) for an identity with a token; its error then means
// the database cannot be asked: the call fails closed.
func (s *Store) access(ctx context.Context, id *auth.Identity, ws uuid.UUID) (*access, error) {
	cred, err := id.Check(ctx, &ws)
	if err != nil {
		return nil, err
	}
	a := &access{s: s, ws: ws, trusted: cred.Trusted, hash: cred.TokenHash, found: cred.Found}
	if !a.trusted {
		if a.schema, err = s.tokens.readSchema(ctx); err != nil {
			return nil, err
		}
		a.schema.acceptUnanchored = s.AcceptUnanchoredOrgTokens
	}
	a.callerMayAct = a.schema.mayActSQL()
	return a, nil
}

// args returns named with the caller's arguments added: those
// callerMayAct names, and @workspace. Strict: a statement that does not
// name each of them fails before it is sent (pgx.StrictNamedArgs).
func (a *access) args(named pgx.StrictNamedArgs) (pgx.StrictNamedArgs, error) {
	if a == nil || a.callerMayAct == "" {
		return nil, errNoAccess
	}
	out := make(pgx.StrictNamedArgs, len(named)+3)
	maps.Copy(out, named)
	out["caller_trusted"] = a.trusted
	out["caller_hash"] = a.hash // SQL NULL when trusted: matches no token
	out["workspace"] = a.ws
	return out, nil
}

// send sends b, the call's statements (each naming callerMayAct, each
// queued with its own pgx.StrictNamedArgs or none), with the caller's
// arguments added to each (args), and before them the look-up of the
// caller's bearer when it is still to be looked up (else, for a bearer,
// callerMayAct alone: the round trip's verdict): one round trip, one
// implicit transaction (none when b is empty: a trusted caller and
// nothing queued). The first of them decides callerMayAct for the whole
// round trip (mayActSQL). So a refused bearer reads and stores nothing, even
// though its look-up runs beside the work, and its answer costs no round
// trip of its own.
//
// It returns the caller's refusal, auth.ErrInvalid (also for a token
// that may no longer act, in a round trip after its look-up's),
// auth.ErrUnanchored or auth.ErrNotAllowed (refused tells these apart; what the look-up found, refused or not, is
// recorded for the request's logs and the token's stamp: auth.Found), or
// the batch's error, named op: ErrUnavailable when the database is down
// or the token tables changed under the statements. A statement queued
// with other arguments, or any statement of an access no check made
// (errNoAccess), is refused before anything is sent.
func (a *access) send(ctx context.Context, op string, b *pgx.Batch) error {
	if a == nil || a.callerMayAct == "" {
		return fmt.Errorf("%s: %w", op, errNoAccess)
	}
	for _, q := range b.QueuedQueries {
		var named pgx.StrictNamedArgs
		if len(q.Arguments) > 0 {
			n, ok := q.Arguments[0].(pgx.StrictNamedArgs)
			if !ok || len(q.Arguments) > 1 {
				return fmt.Errorf("%s: a statement without named arguments", op)
			}
			named = n
		}
		args, err := a.args(named)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if q.SQL, q.Arguments, err = rewritten(ctx, q.SQL, args); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	var l *lookup
	var mayAct *bool
	switch {
	case a.found != nil:
		var lb pgx.Batch
		l = a.schema.queueLookup(&lb, a.hash, &a.ws)
		b.QueuedQueries = append(lb.QueuedQueries, b.QueuedQueries...)
	case !a.trusted && b.Len() > 0:
		// A round trip after the look-up's, its own transaction: its
		// first statement decides callerMayAct for all of them (mayActSQL),
		// and says what it decided, so that a token revoked since the
		// look-up is a refusal, not a batch that quietly stored nothing.
		args, err := a.args(pgx.StrictNamedArgs{})
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		sql, vals, err := rewritten(ctx, `SELECT `+a.callerMayAct, args)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		mayAct = new(bool)
		var vb pgx.Batch
		vb.Queue(sql, vals...).QueryRow(func(row pgx.Row) error { return row.Scan(mayAct) })
		b.QueuedQueries = append(vb.QueuedQueries, b.QueuedQueries...)
	}
	if b.Len() > 0 {
		if err := a.s.db.SendBatch(ctx, b).Close(); err != nil {
			return a.s.batchError(op, err)
		}
	}
	if mayAct != nil && !*mayAct {
		return fmt.Errorf("%s: the token no longer may act: %w", op, auth.ErrInvalid)
	}
	if l == nil {
		return nil
	}
	found := a.found
	a.found = nil // looked up: the call's next round trips need no look-up
	return l.settle(found, a.s.tokens)
}

// rewrittenCap bounds the statements whose rewriting rewritten keeps: the
// package's statements, times the token schemas a process meets, are far
// fewer; past it a statement is rewritten on each call, as pgx would.
const rewrittenCap = 512

// rewrites holds what pgx's rewriting of named arguments made of each
// statement: its SQL with $n placeholders, and the names in their order.
var rewrites struct {
	sync.Mutex
	m map[string]rewrite
}

type rewrite struct {
	sql   string
	names []string
}

// rewritten returns sql with args bound by position, as pgx would send a
// statement queued with args (pgx.StrictNamedArgs.RewriteQuery, whose
// parse it uses: strings, comments and casts left as they are), parsed
// once per statement instead of on every call: the parse was a sixth of an
// upload's allocations. Strict as pgx is: every name the statement uses is
// in args, and args names nothing else.
func rewritten(ctx context.Context, sql string, args pgx.StrictNamedArgs) (string, []any, error) {
	rewrites.Lock()
	rw, ok := rewrites.m[sql]
	rewrites.Unlock()
	if !ok {
		byName := make(pgx.StrictNamedArgs, len(args))
		for k := range args {
			byName[k] = k
		}
		newSQL, names, err := byName.RewriteQuery(ctx, nil, sql, nil)
		if err != nil {
			return "", nil, err
		}
		rw = rewrite{sql: newSQL, names: make([]string, len(names))}
		for i, n := range names {
			rw.names[i] = n.(string)
		}
		rewrites.Lock()
		if rewrites.m == nil {
			rewrites.m = map[string]rewrite{}
		}
		if len(rewrites.m) < rewrittenCap {
			rewrites.m[sql] = rw
		}
		rewrites.Unlock()
	}
	if len(rw.names) != len(args) {
		return "", nil, fmt.Errorf("statement names %d arguments, given %d: %v", len(rw.names), len(args), slices.Sorted(maps.Keys(args)))
	}
	out := make([]any, len(rw.names))
	for i, n := range rw.names {
		v, ok := args[n]
		if !ok {
			return "", nil, fmt.Errorf("argument %s missing", n)
		}
		out[i] = v
	}
	return rw.sql, out, nil
}

// batchError wraps the error of a batch that carried a token look-up or
// guard, as wrap does; when the batch met a relation, column or function
// that is gone (the platform's token tables changed under the service),
// the tokens read the schema again at the next call and this one is
// ErrUnavailable: 503, and the retry is checked against the tables as
// they are now, never a 500 for every caller until a restart.
func (s *Store) batchError(op string, err error) error {
	if s.tokens.schemaChanged(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return wrap(op, err)
}

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
	db      DB
	logger  func() *slog.Logger
	metrics func() *metrics.Emitter // the Store's (nil: none)
	now     func() time.Time        // the Store's clock: the schema's age

	// reading is held while the schema is read: a semaphore of one, so
	// that a request waiting for another's read gives up at its own
	// context's end (a sync.Mutex would hold it past its deadline).
	reading *semaphore.Weighted
	schema  atomic.Pointer[tokenSchema] // nil until read
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
	// acceptUnanchored: an org token without an anchor (org_id NULL: never
	// set, or its anchor workspace deleted, which the platform's foreign
	// key turns into NULL) may act on every workspace, the platform's
	// legacy rule; false (the default) refuses it (auth.ErrUnanchored).
	// The Store's Settings.AcceptUnanchoredOrgTokens, not the database's.
	acceptUnanchored bool
}

// orgColumns are the columns the org look-up (orgAllowedSQL, lookupSQL,
// stamp) names, table.column.
const orgColumns = `{org_api_tokens.token_hash,org_api_tokens.prefix,org_api_tokens.last_used_at,
	org_api_tokens.revoked_at,org_api_tokens.org_id,org_api_tokens.expires_at,workspaces.id,workspaces.parent_id}`

// readSchema returns the schema, reading it on first use and when it is
// older than TokenTablesMaxAge. Its error means the database cannot be
// asked: the call fails closed. A first read waits for another request's
// read at most until ctx ends, and returns ctx's error then (wrapped in
// ErrUnavailable at its deadline: a 503).
func (t *tokens) readSchema(ctx context.Context) (tokenSchema, error) {
	old := t.schema.Load()
	if old != nil && t.now().Sub(old.readAt) < TokenTablesMaxAge {
		return *old, nil // nearly every request: no lock
	}
	if old == nil {
		if err := t.reading.Acquire(ctx, 1); err != nil {
			return tokenSchema{}, wrap("token check: token tables", err)
		}
	} else if !t.reading.TryAcquire(1) {
		return *old, nil // another request is reading it
	}
	defer t.reading.Release(1)
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

// mayActSQL is the condition, named callerMayAct where statements use
// it (access), that the caller may act on the workspace: over the named
// arguments @caller_trusted (an identity settled outside the database:
// auth.Identity.Trusted), @caller_hash (a token's SHA-256; NULL, which
// matches no token, for a trusted one) and @workspace. It holds for a
// trusted identity, or a live token allowed on that workspace. A NULL
// never makes it hold: only @caller_trusted does.
//
// One rule, one snapshot: the token tables are read once a transaction.
// The first statement of a transaction that evaluates it for a caller
// and workspace (a call's bearer look-up, which comes first in its round
// trip: lookupSQL) keeps its verdict in the transaction's own setting
// (set_config(…, true): gone at its end, never seen by another); every
// later statement of that transaction reads that verdict instead of the
// tables. Under READ COMMITTED each statement has its own snapshot, so a
// token revoked (or restored) between two statements of a round trip
// would otherwise be allowed by one and refused by the next: rows that
// are not all stored, or stored beside a refusal.
func (s tokenSchema) mayActSQL() string {
	allowed := `EXISTS (
		SELECT 1 FROM workspace_auth_tokens tok
		WHERE tok.token_hash = @caller_hash::bytea AND tok.revoked_at IS NULL AND tok.workspace_id = @workspace::uuid)`
	if s.orgTokens {
		allowed += " OR " + s.orgAllowedSQL()
	}
	return `(@caller_trusted::boolean OR coalesce(
		(SELECT split_part(v, '=', 2) = 'true' FROM current_setting('` + verdictSetting + `', true) AS v
		 WHERE split_part(v, '=', 1) = ` + verdictKey + `),
		split_part(set_config('` + verdictSetting + `', ` + verdictKey + ` || '=' || (` + allowed + `)::text, true), '=', 2) = 'true'))`
}

// verdictSetting is the transaction's setting where callerMayAct keeps
// its verdict (mayActSQL): "<key>=true" or "<key>=false".
const verdictSetting = "pendinguploads.caller_may_act"

// verdictKey is the SQL of whom and where a kept verdict is for: the
// caller's token hash and the workspace.
const verdictKey = `(coalesce(encode(@caller_hash::bytea, 'hex'), '') || '/' || coalesce(@workspace::uuid::text, ''))`

// orgAllowedSQL is the SQL condition that a live org token of hash
// @caller_hash may act on workspace @workspace: anchored (org_id) to a
// workspace of the same org (org roots compared, following
// parent_id up from each, at most 64 levels), or to the control plane's
// org UUID whose UUID v5 is the org root's id; or unanchored (org_id
// NULL), only where the deployment accepts those (acceptUnanchored: the
// platform's legacy rule, every workspace). Each walk starts from one
// row found by its primary key, so the planner's estimate stays small (a
// large one would have Postgres JIT-compile the statement: half a
// second, every time).
func (s tokenSchema) orgAllowedSQL() string {
	v5 := "false"
	if s.uuidv5 {
		// UUID v5 (SHA-1, RFC 4122 URL namespace) of
		// "molecule-platform-agent:" + the org UUID.
		v5 = `r.id = (SELECT encode(set_byte(set_byte(d, 6, (get_byte(d, 6) & 15) | 80), 8, (get_byte(d, 8) & 63) | 128), 'hex')::uuid
		              FROM substring(digest('\x6ba7b8119dad11d180b400c04fd430c8'::bytea
		                  || convert_to('molecule-platform-agent:' || o.org_id::text, 'UTF8'), 'sha1') FROM 1 FOR 16) AS d)`
	}
	unanchored := ""
	if s.acceptUnanchored {
		unanchored = "o.org_id IS NULL OR "
	}
	return `EXISTS (
		WITH RECURSIVE o AS (
		    SELECT org_id FROM org_api_tokens
		    WHERE token_hash = @caller_hash::bytea AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
		), ws_up(id, parent_id, depth) AS (
		    SELECT id, parent_id, 0 FROM workspaces WHERE id = @workspace::uuid
		  UNION ALL
		    SELECT w.id, w.parent_id, u.depth + 1 FROM ws_up u JOIN workspaces w ON w.id = u.parent_id WHERE u.depth < 64
		), anchor_up(id, parent_id, depth) AS (
		    SELECT w.id, w.parent_id, 0 FROM o JOIN workspaces w ON w.id = o.org_id
		  UNION ALL
		    SELECT w.id, w.parent_id, u.depth + 1 FROM anchor_up u JOIN workspaces w ON w.id = u.parent_id WHERE u.depth < 64
		)
		SELECT 1 FROM o
		WHERE ` + unanchored + `EXISTS (
		    SELECT 1 FROM ws_up r WHERE r.parent_id IS NULL
		      AND (` + v5 + ` OR r.id IN (SELECT id FROM anchor_up WHERE parent_id IS NULL))))`
}

// lookupSQL finds a live token by its hash (@caller_hash): where it
// lives, its workspace (a workspace token's), its safe prefix, whether
// last_used_at is due, whether it may act on workspace @workspace
// (NULL: a call that names no workspace, for which any live token will
// do), and whether it is an org token without an anchor; NULLs for no
// live token. In the same statement, so in the same snapshot, it
// evaluates callerMayAct for @caller_hash on @workspace, which keeps that
// verdict for the rest of the transaction (mayActSQL): the call's
// statements that follow agree with the look-up. The indexes on
// token_hash compare digests, never tokens.
func (s tokenSchema) lookupSQL() string {
	q := `
		SELECT 'workspace_auth_tokens' AS token_table, workspace_id, prefix,
		       coalesce(last_used_at <= now() - interval '1 minute', true) AS stamp_due,
		       @workspace::uuid IS NULL OR workspace_id = @workspace::uuid AS allowed, false AS unanchored
		FROM workspace_auth_tokens WHERE token_hash = @caller_hash::bytea AND revoked_at IS NULL`
	if s.orgTokens {
		q += `
		UNION ALL
		SELECT 'org_api_tokens', NULL::uuid, prefix, coalesce(last_used_at <= now() - interval '1 minute', true),
		       @workspace::uuid IS NULL OR ` + s.orgAllowedSQL() + `, org_id IS NULL
		FROM org_api_tokens
		WHERE token_hash = @caller_hash::bytea AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`
	}
	return `
		SELECT l.token_table, l.workspace_id, l.prefix, l.stamp_due, l.allowed, l.unanchored, ` + s.mayActSQL() + `
		FROM (VALUES (1)) AS one(x) LEFT JOIN (` + q + `
		LIMIT 1) AS l ON true`
}

// lookup is one bearer's look-up, queued in a batch; found is its row
// once the batch ran, nil for no live token.
type lookup struct {
	hash             []byte // the bearer's SHA-256
	acceptUnanchored bool   // tokenSchema.acceptUnanchored
	found            *foundToken
}

// foundToken is a look-up's row.
type foundToken struct {
	table       string
	workspaceID *uuid.UUID
	prefix      string
	stampDue    bool
	allowed     bool
	unanchored  bool // an org token without an anchor workspace
}

// queueLookup adds the look-up of the token of SHA-256 hash, for
// workspace ws (nil: any), to b.
func (s tokenSchema) queueLookup(b *pgx.Batch, hash []byte, ws *uuid.UUID) *lookup {
	l := &lookup{hash: hash, acceptUnanchored: s.acceptUnanchored}
	b.Queue(s.lookupSQL(), pgx.StrictNamedArgs{"caller_hash": hash, "workspace": ws, "caller_trusted": false}).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var table, prefix *string
			var stampDue, allowed, unanchored *bool
			f := &foundToken{}
			if err := rows.Scan(&table, &f.workspaceID, &prefix, &stampDue, &allowed, &unanchored, nil); err != nil {
				return err
			}
			if table != nil {
				f.table, f.prefix, f.stampDue, f.allowed, f.unanchored = *table, *prefix, *stampDue, *allowed, *unanchored
				l.found = f
			}
		}
		return rows.Err()
	})
	return l
}

// settle records in found what the look-up, once run, found of its
// bearer (a live token's kind, workspace and prefix, for the request's
// logs, and its stamp when due: tokens.stamp), and returns its verdict:
// nil, or the refusal, auth.ErrInvalid (no live token: nothing recorded),
// auth.ErrUnanchored (an org token without an anchor, where the
// deployment does not accept those) or auth.ErrNotAllowed. Every use of
// an unanchored org token, accepted or refused, is logged (its prefix,
// never the token) and counted (metrics.UnanchoredOrgToken).
func (l *lookup) settle(found *auth.Found, t *tokens) error {
	f := l.found
	if f == nil {
		return auth.ErrInvalid
	}
	found.Kind, found.WorkspaceID, found.TokenPrefix = auth.Org, uuid.Nil, f.prefix
	if f.workspaceID != nil {
		found.Kind, found.WorkspaceID = auth.Workspace, *f.workspaceID
	}
	if f.unanchored {
		t.unanchoredUse(f, l.acceptUnanchored)
		if !l.acceptUnanchored {
			return auth.ErrUnanchored
		}
	}
	if stamp := t.stamp(l); stamp != nil {
		found.Stamp = stamp
	}
	if !f.allowed {
		return auth.ErrNotAllowed
	}
	return nil
}

// unanchoredUse logs and counts the use of an org token without an
// anchor workspace (f), accepted or not: an operator who keeps the legacy
// rule (ACCEPT_UNANCHORED_ORG_TOKENS) sees which tokens still need it,
// and one who does not sees who is refused.
func (t *tokens) unanchoredUse(f *foundToken, accepted bool) {
	outcome := metrics.OutcomeRefused
	if accepted && f.allowed {
		outcome = metrics.OutcomeAccepted
	}
	t.logger().Warn("an org token without an anchor workspace (org_id NULL) was presented",
		"token_prefix", f.prefix, "outcome", outcome, "accept_unanchored_org_tokens", accepted)
	if t.metrics == nil {
		return
	}
	if outcome == metrics.OutcomeAccepted {
		t.metrics().Count(metrics.UnanchoredOrgToken, map[string]string{metrics.Outcome: metrics.OutcomeAccepted}, 1, nil)
	} else {
		t.metrics().Count(metrics.UnanchoredOrgToken, map[string]string{metrics.Outcome: metrics.OutcomeRefused}, 1, nil)
	}
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
	hash, prefix := l.hash, f.prefix
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
// returns nil when id may act, auth.ErrInvalid, auth.ErrNotAllowed, or the
// database's error (ErrUnavailable when it is down or the token tables
// changed under the look-up); what the look-up found is recorded in the
// request's context (auth.FoundIn). An identity auth's check refuses
// (auth.Identity.Check) is refused before any I/O.
func (s *Store) Verify(ctx context.Context, id *auth.Identity, ws *uuid.UUID) error {
	cred, err := id.Check(ctx, ws)
	if err != nil || !cred.Bearer {
		return err
	}
	schema, err := s.tokens.readSchema(ctx)
	if err != nil {
		return err
	}
	schema.acceptUnanchored = s.AcceptUnanchoredOrgTokens
	var b pgx.Batch
	l := schema.queueLookup(&b, cred.TokenHash, ws)
	if err := s.db.SendBatch(ctx, &b).Close(); err != nil {
		return s.batchError("token look-up", err)
	}
	return l.settle(cred.Found, s.tokens)
}
