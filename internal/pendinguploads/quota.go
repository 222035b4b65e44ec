package pendinguploads

import (
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
)

// The per-workspace quota: what one workspace may have waiting, unacked
// and unexpired (Store.MaxPendingBytes, Store.MaxPendingFiles; 0 turns
// either off). Stage and Commit hold it exactly: their batch takes the
// workspace's lock before it counts, so concurrent calls count one after
// another and together never pass it. Presign checks it early, without
// the lock: a commit may still be refused.

// QuotaError is a call refused for the workspace's quota. Nothing is
// stored.
type QuotaError struct {
	// Quota names the quota: "pending_bytes" or "pending_files".
	Quota string
	// Limit is the quota; Pending what waits now; Adding what the call
	// would add.
	Limit, Pending, Adding int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("workspace quota %s exceeded: %d pending + %d would pass %d", e.Quota, e.Pending, e.Adding, e.Limit)
}

// quota is one call's check of the quota.
type quota struct {
	maxFiles, maxBytes int64 // math.MaxInt64 when off
	files, bytes       int64 // what the call adds
	pending            struct{ files, bytes int64 }
	measured           bool
}

// quotaFor returns the check of a call adding files of total bytes, or
// nil when the Store has no quota.
func (s *Store) quotaFor(files, bytes int64) *quota {
	if s.MaxPendingBytes <= 0 && s.MaxPendingFiles <= 0 {
		return nil
	}
	q := &quota{maxFiles: s.MaxPendingFiles, maxBytes: s.MaxPendingBytes, files: files, bytes: bytes}
	if q.maxFiles <= 0 {
		q.maxFiles = math.MaxInt64
	}
	if q.maxBytes <= 0 {
		q.maxBytes = math.MaxInt64
	}
	return q
}

// queue adds to rt: with lock, the workspace's lock (held to the end of
// the batch's transaction, taken only for a caller allowed on the
// workspace), then the count of what waits, which the refusal reports.
// The statement that stores must carry cond, which counts again in its
// own snapshot, after the lock.
func (q *quota) queue(rt *roundTrip, lock bool) {
	if q == nil {
		return
	}
	if lock {
		// A transaction-level advisory lock per workspace: concurrent
		// stages of one workspace count one after the other.
		rt.queue(`SELECT pg_advisory_xact_lock(hashtextextended(@workspace::text, 7226)) WHERE `+rt.callerMayAct, nil)
	}
	rt.queue(`
		SELECT count(*), coalesce(sum(size_bytes), 0)::bigint FROM pending_uploads
		WHERE workspace_id = @workspace AND acked_at IS NULL AND expires_at > now() AND `+rt.callerMayAct, nil,
	).QueryRow(func(row pgx.Row) error {
		q.measured = true
		return row.Scan(&q.pending.files, &q.pending.bytes)
	})
}

// quotaFits is the condition, named where a statement that stores
// uses it, that what a call adds fits the workspace's quota, counted in
// the statement's own snapshot: over @quota_off (no quota: the count is
// skipped), @quota_files, @quota_bytes (what the call adds),
// @quota_max_files, @quota_max_bytes and @workspace (quota.args binds
// them).
const quotaFits = `(@quota_off::boolean OR (SELECT count(*) + @quota_files::bigint <= @quota_max_files::bigint
		    AND coalesce(sum(size_bytes), 0) + @quota_bytes::bigint <= @quota_max_bytes::bigint
		FROM pending_uploads WHERE workspace_id = @workspace AND acked_at IS NULL AND expires_at > now()))`

// args adds to named the arguments quotaFits names (a nil quota: off),
// and returns named.
func (q *quota) args(named pgx.StrictNamedArgs) pgx.StrictNamedArgs {
	named["quota_off"] = q == nil
	named["quota_files"], named["quota_max_files"] = int64(0), int64(math.MaxInt64)
	named["quota_bytes"], named["quota_max_bytes"] = int64(0), int64(math.MaxInt64)
	if q != nil {
		named["quota_files"], named["quota_max_files"] = q.files, q.maxFiles
		named["quota_bytes"], named["quota_max_bytes"] = q.bytes, q.maxBytes
	}
	return named
}

// refusal is the QuotaError the measured counts show, or nil when the
// call fits (or nothing was measured).
func (q *quota) refusal() error {
	if q == nil || !q.measured {
		return nil
	}
	switch {
	case q.pending.bytes+q.bytes > q.maxBytes:
		return &QuotaError{Quota: "pending_bytes", Limit: q.maxBytes, Pending: q.pending.bytes, Adding: q.bytes}
	case q.pending.files+q.files > q.maxFiles:
		return &QuotaError{Quota: "pending_files", Limit: q.maxFiles, Pending: q.pending.files, Adding: q.files}
	}
	return nil
}

// andEach is " AND c" for each non-empty SQL condition c, to follow a
// condition.
func andEach(conds ...string) string {
	out := ""
	for _, c := range conds {
		if c != "" {
			out += " AND " + c
		}
	}
	return out
}
