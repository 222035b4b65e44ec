package pendinguploads

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/auth"
)

// access is a caller checked for one workspace: the only value from
// which a statement that reads or writes a workspace's files (its
// pending_uploads and presigned_uploads rows, their objects) is built.
// Only Store.access makes one, and it refuses before any I/O an identity
// that cannot act on the workspace whatever the database says: none at
// all, a kind that names no credential, a token-backed identity without
// its token's hash, a workspace token's identity for another workspace.
// Its zero value holds no condition and is refused wherever it is used
// (errNoAccess): nil or zero never means trusted.
//
// What the database must still confirm (that the token is live and may
// act on the workspace) each statement confirms itself: it names
// callerMayAct in its SQL, over the arguments args binds.
type access struct {
	caller  *auth.Identity
	ws      uuid.UUID
	trusted bool   // settled outside the database: auth.Identity.Trusted
	hash    []byte // the token's SHA-256; nil only when trusted
	// callerMayAct is the SQL condition, over @caller_trusted,
	// @caller_hash and @workspace, that the caller may act on the
	// workspace: a trusted identity, or a live token allowed on it
	// (tokenSchema.mayActSQL). Every statement built from the access
	// names it.
	callerMayAct string
	schema       tokenSchema // what the look-up of a Bearer reads
}

// errNoAccess is a statement built from an access no check made: a bug,
// never sent.
var errNoAccess = errors.New("a statement without a checked caller (access)")

// checkIdentity refuses, without I/O, an identity that cannot act on any
// workspace: nil, a kind that names no credential, or a token-backed one
// without its token's hash (auth.ErrInvalid). trusted says it needs no
// token check.
func checkIdentity(id *auth.Identity) (trusted bool, err error) {
	switch {
	case id == nil:
		return false, fmt.Errorf("%w: no identity", auth.ErrInvalid)
	case id.Trusted():
		return true, nil
	case id.Kind != auth.Bearer && id.Kind != auth.Workspace && id.Kind != auth.Org:
		return false, fmt.Errorf("%w: a %s identity not settled by auth", auth.ErrInvalid, id.Kind)
	case len(id.TokenHash()) != sha256.Size:
		return false, fmt.Errorf("%w: a %s identity without its token's hash", auth.ErrInvalid, id.Kind)
	}
	return false, nil
}

// access checks that id may act on workspace ws as far as can be told
// without the database (checkIdentity; a workspace token's identity for
// another workspace is auth.ErrNotAllowed), then returns the access its
// statements are built from. Its only I/O is the read of the token
// tables (at most every TokenTablesMaxAge) for an identity with a token;
// its error then means the database cannot be asked: the call fails
// closed.
func (s *Store) access(ctx context.Context, id *auth.Identity, ws uuid.UUID) (access, error) {
	trusted, err := checkIdentity(id)
	if err != nil {
		return access{}, err
	}
	if id.Kind == auth.Workspace && id.WorkspaceID != ws {
		return access{}, auth.ErrNotAllowed
	}
	a := access{caller: id, ws: ws, trusted: trusted}
	if !trusted {
		if a.schema, err = s.tokens.readSchema(ctx); err != nil {
			return access{}, err
		}
		a.hash = id.TokenHash()
	}
	a.callerMayAct = a.schema.mayActSQL()
	return a, nil
}

// args returns named with the caller's arguments added: those
// callerMayAct names, and @workspace. Strict: a statement that does not
// name each of them fails before it is sent (pgx.StrictNamedArgs).
func (a access) args(named pgx.StrictNamedArgs) (pgx.StrictNamedArgs, error) {
	if a.callerMayAct == "" {
		return nil, errNoAccess
	}
	out := make(pgx.StrictNamedArgs, len(named)+3)
	maps.Copy(out, named)
	out["caller_trusted"] = a.trusted
	out["caller_hash"] = a.hash // SQL NULL when trusted: matches no token
	out["workspace"] = a.ws
	return out, nil
}

// roundTrip is one call's round trip to the database for one access: a
// batch (one implicit transaction) that carries the look-up of the
// caller's bearer token, when it has one still to be looked up, beside
// the statements of the call's work, each naming access.callerMayAct. So
// a refused bearer reads and stores nothing, even though its look-up runs
// beside the work; and its answer costs no round trip of its own.
//
// Make one with Store.roundTrip, queue each statement with its named
// arguments, then send: send returns the caller's verdict. A roundTrip is
// used once, by one goroutine.
type roundTrip struct {
	s *Store
	access
	batch  pgx.Batch
	lookup *lookup // nil when the caller needs none
	err    error   // a statement refused at queueing
}

// roundTrip starts the round trip of a call acting for id on workspace
// ws, after Store.access's check: its refusal, before any I/O, or its
// failure to read the token tables (at most every TokenTablesMaxAge),
// when the database cannot be asked and the call fails closed.
func (s *Store) roundTrip(ctx context.Context, id *auth.Identity, ws uuid.UUID) (*roundTrip, error) {
	a, err := s.access(ctx, id, ws)
	if err != nil {
		return nil, err
	}
	return s.roundTripOf(a)
}

// roundTripOf starts a round trip for an access already made.
func (s *Store) roundTripOf(a access) (*roundTrip, error) {
	if a.callerMayAct == "" {
		return nil, errNoAccess
	}
	rt := &roundTrip{s: s, access: a}
	if a.caller.Kind == auth.Bearer {
		rt.lookup = a.schema.queueLookup(&rt.batch, a.caller, &a.ws)
	}
	return rt, nil
}

// queue adds sql, with named and the caller's arguments (access.args), to
// the batch; chain Query, QueryRow or Exec to read its result. sql must
// name callerMayAct: one that does not use every argument is refused
// when sent (pgx.StrictNamedArgs), and so is any statement of a roundTrip
// whose access no check made.
func (rt *roundTrip) queue(sql string, named pgx.StrictNamedArgs) *pgx.QueuedQuery {
	args, err := rt.args(named)
	if err != nil {
		rt.err = err
		return &pgx.QueuedQuery{} // not in the batch
	}
	return rt.batch.Queue(sql, args)
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
