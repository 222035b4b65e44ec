package pendinguploads

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/auth"
)

// callerMayAct marks, in a statement queued on a roundTrip, where the
// condition that the call's caller may act on the call's workspace goes.
// The roundTrip writes the condition there and binds its parameters; it
// refuses a statement without the mark (errUnguarded), so no statement
// that reads or writes a workspace's files runs for a caller it did not
// check.
const callerMayAct = "/* caller may act */"

// errUnguarded is a statement queued without callerMayAct: a bug, never
// sent.
var errUnguarded = errors.New("a statement queued without the caller's check (callerMayAct)")

// roundTrip is one call's round trip to the database for one caller on
// one workspace: a batch (one implicit transaction) that carries the
// look-up of the caller's bearer token, when it has one still to be
// looked up, beside the statements of the call's work, each of them
// guarded by the condition that the caller may act on the workspace. So a
// refused bearer reads and stores nothing, even though its look-up runs
// beside the work; and its answer costs no round trip of its own.
//
// Make one with Store.roundTrip, add each statement's parameters through
// its statement (statement.Arg numbers them), queue, then send: send
// returns the caller's verdict. A roundTrip is used once, by one
// goroutine.
type roundTrip struct {
	s      *Store
	caller *auth.Identity
	ws     uuid.UUID
	schema tokenSchema
	batch  pgx.Batch
	lookup *lookup // nil when the caller needs none
	err    error   // a statement refused at queueing
}

// roundTrip starts the round trip of a call acting for caller on
// workspace ws. Its error (reading the token tables, at most every
// TokenTablesMaxAge) means the database cannot be asked: the call fails
// closed.
func (s *Store) roundTrip(ctx context.Context, caller *auth.Identity, ws uuid.UUID) (*roundTrip, error) {
	rt := &roundTrip{s: s, caller: caller, ws: ws}
	if caller.Trusted() {
		return rt, nil
	}
	schema, err := s.tokens.readSchema(ctx)
	if err != nil {
		return nil, err
	}
	rt.schema = schema
	if caller.Kind == auth.Bearer {
		rt.lookup = schema.queueLookup(&rt.batch, caller, &ws)
	}
	return rt, nil
}

// statement is one statement's parameters, numbered as they are added.
type statement struct {
	rt   *roundTrip
	args []any
	ws   string // the placeholder of the call's workspace, once bound
}

// statement returns a statement of rt, with no parameters yet.
func (rt *roundTrip) statement() *statement { return &statement{rt: rt} }

// Arg binds v as the statement's next parameter and returns its
// placeholder ("$3").
func (st *statement) Arg(v any) string {
	st.args = append(st.args, v)
	return fmt.Sprintf("$%d", len(st.args))
}

// Workspace is the placeholder of the call's workspace, bound once per
// statement.
func (st *statement) Workspace() string {
	if st.ws == "" {
		st.ws = st.Arg(st.rt.ws)
	}
	return st.ws
}

// queue adds st's sql to the batch with callerMayAct replaced by the
// condition that the caller may act on the workspace; chain Query,
// QueryRow or Exec to read its result. A statement without callerMayAct is
// not queued, and send fails.
func (rt *roundTrip) queue(st *statement, sql string) *pgx.QueuedQuery {
	if !strings.Contains(sql, callerMayAct) {
		rt.err = errUnguarded
		return &pgx.QueuedQuery{} // not in the batch
	}
	var hash []byte // SQL NULL: a trusted caller
	if !rt.caller.Trusted() {
		hash = rt.caller.TokenHash()
	}
	cond := rt.schema.mayActSQL(st.Arg(hash), st.Workspace())
	return rt.batch.Queue(strings.ReplaceAll(sql, callerMayAct, cond), st.args...)
}

// send sends the batch, one round trip (none when it is empty: a
// trusted caller and nothing queued), and returns the caller's verdict:
// who the call acts as (the caller, or for a bearer looked up here the
// identity found: a new value, recorded also in ctx for the request's
// logs and the token's stamp, auth.RecordFound), or its refusal,
// auth.ErrInvalid or auth.ErrNotAllowed (refused tells these apart).
// Any other error is the batch's, named op: ErrUnavailable when the
// database is down or the token tables changed under the statements.
func (rt *roundTrip) send(ctx context.Context, op string) (*auth.Identity, error) {
	if rt.err != nil {
		return nil, fmt.Errorf("%s: %w", op, rt.err)
	}
	if rt.batch.Len() > 0 {
		if err := rt.s.db.SendBatch(ctx, &rt.batch).Close(); err != nil {
			return nil, rt.s.batchError(op, err)
		}
	}
	if rt.lookup == nil {
		if rt.caller.Kind == auth.Workspace && rt.caller.WorkspaceID != rt.ws {
			return rt.caller, auth.ErrNotAllowed
		}
		return rt.caller, nil
	}
	found, err := rt.lookup.verdict()
	if rt.lookup.found != nil {
		auth.RecordFound(ctx, found, rt.s.tokens.stamp(rt.lookup))
	}
	return found, err
}

// refused reports whether err is a caller's refusal (send's verdict), as
// opposed to the database's error.
func refused(err error) bool {
	return errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrNotAllowed)
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
