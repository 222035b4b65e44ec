package pendinguploads

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// SweepResult counts the rows one Sweep deleted.
type SweepResult struct {
	Acked   int `json:"acked"`   // acked longer ago than the retention
	Expired int `json:"expired"` // never acked, past expires_at
	// Orphans are objects written for rows that never committed (a
	// request whose answer was lost), deleted by this sweep.
	Orphans int `json:"orphans"`
	// Activity counts activity_logs rows this service wrote that were
	// older than ActivityRetention, on a standalone database only.
	Activity int `json:"activity,omitempty"`
	// Unfinished says the sweep stopped before it had deleted every
	// eligible row: SweepReserve before its deadline, or after
	// MaxSweepBatches batches of a pass. What is left is where the next
	// sweep starts: each pass walks its rows in the order of its index
	// (acked_at, expires_at), so the rest is the rest of that order.
	Unfinished bool `json:"unfinished,omitempty"`
}

// maxSweepBatches bounds one pass of a Sweep when Store.MaxSweepBatches
// is 0: at the default batch size, ten million rows. A larger backlog is
// finished by the next run.
const maxSweepBatches = 10000

// Sweep deletes acked rows whose acked_at is older than ackRetention
// (negative means 0) and unacked rows past expires_at; an acked row goes
// only by its retention, even past expires_at; on a standalone database,
// the activity rows this service wrote older than ActivityRetention
// (sweepActivity). It deletes in batches of
// SweepBatch rows, each its own short statement and each a range scan of
// the pass's index from where the last batch ended, so every batch costs
// the same however large the backlog. It stops when none are left, or
// early (SweepResult.Unfinished: SweepReserve before ctx's deadline, or
// MaxSweepBatches), and returns what it deleted even when it fails
// part-way.
//
// With a bucket, each batch deletes its objects first and its rows
// second. A failure or crash in between leaves rows that are already
// invisible (acked or expired) and still eligible, so the next sweep
// deletes their (already absent) objects again and then the rows: nothing
// is left that no sweep will ever clean up.
func (s *Store) Sweep(ctx context.Context, ackRetention time.Duration) (SweepResult, error) {
	var res SweepResult
	if ackRetention < 0 {
		ackRetention = 0
	}
	// Each pass runs even when another failed: a stuck object in one must
	// not keep the other's rows forever.
	var errAcked, errExpired, errPresigned, errOrphans, errActivity error
	var cutAcked, cutExpired, cutActivity bool
	res.Acked, cutAcked, errAcked = s.sweepPass(ctx, sweepAcked, ackRetention)
	res.Expired, cutExpired, errExpired = s.sweepPass(ctx, sweepExpired, 0)
	res.Activity, cutActivity, errActivity = s.sweepActivity(ctx)
	res.Unfinished = cutAcked || cutExpired || cutActivity
	// Expired presigns are bookkeeping: not counted; their staging
	// objects go by the bucket's lifecycle rule.
	_, errPresigned = s.sweepPresigned(ctx)
	res.Orphans, errOrphans = s.sweepOrphans(ctx)
	// Files held back for a scan and expired: counted with the expired.
	scanned, cutScanned, errScanned := s.sweepScanned(ctx)
	res.Expired += scanned
	res.Unfinished = res.Unfinished || cutScanned
	return res, errors.Join(errAcked, errExpired, errActivity, errPresigned, errOrphans, errScanned)
}

// activityOurs is the activity_logs table's mark when migrations created
// it (20260601100500_activity_logs): a standalone database. The
// platform's own table carries none, and the sweep never touches it.
const activityOurs = `obj_description('activity_logs'::regclass, 'pg_class') = 'created by pendinguploads'`

// sweepActivityBatch deletes, on a standalone database only, the next $2
// activity rows this service wrote (chat_upload_receive) older than the
// retention ($1, microseconds), from workspace $3 on. It walks the
// workspaces in order through idx_activity_logs_workspace_created (one
// index descent each: no index of created_at alone is needed) and each
// workspace's old rows as a range of the same index, so a pass costs its
// workspaces and the rows it deletes, never the table. It answers how many
// it read and deleted, and the last workspace it reached (where the next
// batch starts); no row when there was nothing to read.
const sweepActivityBatch = `
	WITH RECURSIVE ws(id) AS (
	    (SELECT workspace_id FROM activity_logs
	     WHERE workspace_id >= $3::uuid AND ` + activityOurs + `
	     ORDER BY workspace_id LIMIT 1)
	    UNION ALL
	    SELECT (SELECT workspace_id FROM activity_logs WHERE workspace_id > ws.id ORDER BY workspace_id LIMIT 1)
	    FROM ws WHERE ws.id IS NOT NULL
	), old AS (
	    SELECT a.id, a.workspace_id FROM ws CROSS JOIN LATERAL (
	        SELECT id, workspace_id FROM activity_logs
	        WHERE workspace_id = ws.id AND created_at < now() - $1::bigint * interval '1 microsecond'
	          AND method = 'chat_upload_receive'
	        ORDER BY created_at LIMIT $2) a
	    LIMIT $2
	), gone AS (
	    DELETE FROM activity_logs WHERE id = ANY (ARRAY(SELECT id FROM old)) RETURNING id
	)
	SELECT (SELECT count(*) FROM old), (SELECT count(*) FROM gone), workspace_id
	FROM old ORDER BY workspace_id DESC LIMIT 1`

// sweepActivity deletes the activity rows this service wrote older than
// ActivityRetention (0: none), in batches of SweepBatch, when the table is
// ours; on the platform's database it deletes nothing (the statement's
// own condition). It stops as sweepPass does (unfinished).
func (s *Store) sweepActivity(ctx context.Context) (n int, unfinished bool, err error) {
	if s.ActivityRetention <= 0 {
		return 0, false, nil
	}
	var from uuid.UUID
	for i := 0; ; i++ {
		if i >= s.maxSweepBatches() || nearDeadline(ctx, SweepReserve) {
			return n, true, nil
		}
		var read, deleted int
		err := s.db.QueryRow(ctx, sweepActivityBatch, s.ActivityRetention.Microseconds(), s.SweepBatch, from).
			Scan(&read, &deleted, &from)
		if errors.Is(err, pgx.ErrNoRows) {
			return n, false, nil
		}
		if err != nil {
			return n, false, wrap("sweep activity", err)
		}
		n += deleted
		if read < s.SweepBatch {
			return n, false, nil
		}
	}
}

// Orphan objects: what markOrphans marked.
const (
	// orphanGrace is how old a mark must be before the sweep acts on it:
	// by then the batch whose answer was lost has committed or never will
	// (the request's deadline guard stops a batch that starts late, and
	// statement_timeout, 10 s, one that waits on a lock).
	orphanGrace = time.Minute
	// maxOrphansPerSweep bounds one sweep's orphan pass; more wait for
	// the next sweep.
	maxOrphansPerSweep = 1000
)

// sweepOrphans deletes each marked object whose row does not exist, and
// the marks: one listing, one query by primary key, one delete.
func (s *Store) sweepOrphans(ctx context.Context) (int, error) {
	if s.bucket == nil {
		return 0, nil
	}
	marks, err := s.bucket.List(ctx, orphanPrefix, maxOrphansPerSweep)
	if err != nil {
		return 0, wrap("sweep orphans", err)
	}
	var done, objects []string
	var ids []uuid.UUID
	keyOf := map[uuid.UUID]string{}
	for _, m := range marks {
		if s.Now().Sub(m.Modified) < orphanGrace {
			continue
		}
		done = append(done, m.Key)
		rest := strings.TrimPrefix(m.Key, orphanPrefix)
		_, file, ok := strings.Cut(rest, "/")
		id, err := uuid.Parse(file)
		if !ok || err != nil {
			continue // not a mark of ours: dropped
		}
		ids = append(ids, id)
		keyOf[id] = "objects/" + rest
	}
	if len(done) == 0 {
		return 0, nil
	}
	rows, err := s.db.Query(ctx, `SELECT file_id FROM pending_uploads WHERE file_id = ANY($1::uuid[])`, uuidArray(ids))
	if err != nil {
		return 0, wrap("sweep orphans", err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, wrap("sweep orphans", err)
		}
		delete(keyOf, id) // committed after all: the object is its file
	}
	if err := rows.Err(); err != nil {
		return 0, wrap("sweep orphans", err)
	}
	for _, k := range keyOf {
		objects = append(objects, k)
	}
	// The objects first, then the marks: a failure in between leaves
	// marks that the next sweep handles again.
	if err := s.bucket.Delete(ctx, objects); err != nil {
		return 0, wrap("sweep orphans", err)
	}
	if err := s.bucket.Delete(ctx, done); err != nil {
		return len(objects), wrap("sweep orphans", err)
	}
	return len(objects), nil
}

type sweepKind struct {
	name string
	// key is the column the pass walks, in the order of its index
	// (idx_pending_uploads_acked, idx_pending_uploads_expires): each batch
	// is a range scan of that index from the last batch's end.
	key   string
	where string // $1 is the retention in microseconds
}

var (
	sweepAcked = sweepKind{"acked", "acked_at",
		`acked_at IS NOT NULL AND acked_at < now() - $1::bigint * interval '1 microsecond'`}
	sweepExpired = sweepKind{"expired", "expires_at",
		`acked_at IS NULL AND expires_at < now() AND $1::bigint IS NOT NULL`}
)

// after is the keyset condition of a pass's batch: past the last batch's
// (key, file_id), $3 and $4. The key >= $3 bound starts the index scan
// there, so no batch reads what an earlier one deleted.
func (k sweepKind) after() string {
	return k.key + ` >= $3 AND (` + k.key + `, file_id) > ($3, $4::uuid)`
}

// deleteBatch is a batch without a bucket, one statement: the next
// $2 eligible rows after the cursor ($3, $4) deleted, how many went, how
// many it read, and the last one's (key, file_id), the next cursor; no
// row when there was none. The rows go by primary key (= ANY of an
// array: a join with the batch may be planned as a scan of the table).
func (k sweepKind) deleteBatch() string {
	return `
		WITH batch AS (
		    SELECT file_id, ` + k.key + ` AS k FROM pending_uploads
		    WHERE ` + k.where + ` AND ` + k.after() + `
		    ORDER BY ` + k.key + `, file_id
		    LIMIT $2 FOR UPDATE SKIP LOCKED
		), gone AS (
		    DELETE FROM pending_uploads WHERE file_id = ANY (ARRAY(SELECT file_id FROM batch))
		    RETURNING file_id, workspace_id, size_bytes, acked_at
		), ` + sweptFromTotals + `
		SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM batch), k, file_id
		FROM batch ORDER BY k DESC, file_id DESC LIMIT 1`
}

// selectBatch reads a batch with a bucket: the next $2 eligible rows
// after the cursor ($3, $4), with their object keys, in key order.
func (k sweepKind) selectBatch() string {
	return `
		SELECT file_id, s3_key, ` + k.key + ` FROM pending_uploads
		WHERE ` + k.where + ` AND ` + k.after() + `
		ORDER BY ` + k.key + `, file_id LIMIT $2`
}

// deleteByID deletes, with a bucket, the batch's rows whose objects are
// gone ($2), each still eligible: the predicate again, as a filter on the
// rows found by primary key (IS TRUE keeps the planner from adding a
// bitmap of the pass's index, which would read every eligible row left,
// the whole backlog, in each batch).
func (k sweepKind) deleteByID() string {
	return `
		WITH gone AS (
		    DELETE FROM pending_uploads WHERE file_id = ANY($2::uuid[]) AND (` + k.where + `) IS TRUE
		    RETURNING file_id, workspace_id, size_bytes, acked_at
		), ` + sweptFromTotals + `
		SELECT count(*) FROM gone`
}

// sweptFromTotals is the CTE, beside a sweep's gone (the rows it
// deleted), that takes the unacked ones out of their workspaces' running
// totals (pending_upload_totals) in the statement that deletes them; an
// acked row left its total when it was acked.
const sweptFromTotals = `total AS (
		    UPDATE pending_upload_totals t SET files = t.files - d.files, bytes = t.bytes - d.bytes
		    FROM (SELECT workspace_id, count(*) AS files, sum(size_bytes)::bigint AS bytes
		          FROM gone WHERE acked_at IS NULL GROUP BY workspace_id) d
		    WHERE t.workspace_id = d.workspace_id
		)`

// sweepCursor is where a pass's next batch starts: after (key, id).
type sweepCursor struct {
	key pgtype.Timestamptz
	id  uuid.UUID
}

// startCursor is before every row.
func startCursor() sweepCursor {
	return sweepCursor{key: pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}}
}

// SweepReserve is kept back from a Sweep's deadline: no batch starts
// closer to ctx's deadline than this, so that the run still measures the
// backlog and writes its log line and metrics (a batch takes milliseconds;
// a bucket's DeleteObjects of 1000 keys, a fraction of a second).
const SweepReserve = 10 * time.Second

// sweepPass deletes the rows of one kind, a batch at a time in the order
// of kind's index, until a batch comes back short (done), or it stops
// early (unfinished: SweepReserve before ctx's deadline, or
// MaxSweepBatches). Whatever it left is the rest of the key range, which
// the next sweep's pass starts from.
func (s *Store) sweepPass(ctx context.Context, kind sweepKind, retention time.Duration) (n int, unfinished bool, err error) {
	once := s.sweepRows
	if s.bucket != nil {
		once = s.sweepRowsAndObjects
	}
	total := 0
	batch := s.SweepBatch
	cur := startCursor()
	for i := 0; ; i++ {
		if i >= s.maxSweepBatches() || nearDeadline(ctx, SweepReserve) {
			return total, true, nil
		}
		n, read, err := once(ctx, kind, retention.Microseconds(), batch, &cur)
		total += n
		if err != nil {
			return total, false, wrap("sweep "+kind.name, err)
		}
		if read < batch {
			return total, false, nil
		}
	}
}

func (s *Store) maxSweepBatches() int {
	if s.MaxSweepBatches > 0 {
		return s.MaxSweepBatches
	}
	return maxSweepBatches
}

// nearDeadline says ctx's deadline is closer than reserve.
func nearDeadline(ctx context.Context, reserve time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < reserve
}

// sweepRows deletes one batch of eligible rows after cur, in one
// statement (without a bucket, every file's bytes are in its row), moves
// cur past them, and says how many it deleted and how many it read.
func (s *Store) sweepRows(ctx context.Context, kind sweepKind, retentionMicros int64, batch int, cur *sweepCursor) (deleted, read int, err error) {
	err = s.db.QueryRow(ctx, kind.deleteBatch(), retentionMicros, batch, cur.key, cur.id).Scan(&deleted, &read, &cur.key, &cur.id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	return deleted, read, err
}

// sweepRowsAndObjects deletes one batch of eligible rows after cur and
// their objects: it reads the batch, deletes the objects, then the rows
// whose objects are gone. A row whose object the bucket refused stays (and
// the pass fails, so the refusal shows); a crash in between leaves rows
// that the next sweep finds again.
func (s *Store) sweepRowsAndObjects(ctx context.Context, kind sweepKind, retentionMicros int64, batch int, cur *sweepCursor) (deleted, read int, err error) {
	rows, err := s.db.Query(ctx, kind.selectBatch(), retentionMicros, batch, cur.key, cur.id)
	if err != nil {
		return 0, 0, err
	}
	var ids []uuid.UUID
	var keys []string
	keyOf := map[uuid.UUID]string{}
	for rows.Next() {
		var id uuid.UUID
		var key *string
		if err := rows.Scan(&id, &key, &cur.key); err != nil {
			rows.Close()
			return 0, 0, err
		}
		cur.id = id
		ids = append(ids, id)
		if key != nil {
			keys = append(keys, *key)
			keyOf[id] = *key
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	read = len(ids)
	if read == 0 {
		return 0, 0, nil
	}
	var refusedErr error
	if len(keys) > 0 {
		err := s.bucket.Delete(ctx, keys)
		if partial, ok := errors.AsType[*PartialDeleteError](err); ok {
			// Keep the rows whose objects are still there; delete the rest.
			refused := make(map[string]bool, len(partial.Refused))
			for _, k := range partial.Refused {
				refused[k] = true
			}
			kept := ids[:0]
			for _, id := range ids {
				if !refused[keyOf[id]] {
					kept = append(kept, id)
				}
			}
			ids = kept
			refusedErr = fmt.Errorf("delete %d objects: %w", len(keys), err)
		} else if err != nil {
			return 0, read, fmt.Errorf("delete %d objects: %w", len(keys), err)
		}
	}
	// The predicate again: eligibility only ever grows with time, but a
	// row must never go unless it is eligible at the moment it goes.
	var gone int
	if err := s.db.QueryRow(ctx, kind.deleteByID(), retentionMicros, uuidArray(ids)).Scan(&gone); err != nil {
		return 0, read, err
	}
	// Counted, and reported: with a refusal the pass stops here and the
	// sweep fails, so it shows in the metrics and the alarm.
	return gone, read, refusedErr
}

// sweepPresigned deletes expired presigned uploads, in batches.
func (s *Store) sweepPresigned(ctx context.Context) (int, error) {
	total := 0
	for i := 0; i < maxSweepBatches; i++ {
		tag, err := s.db.Exec(ctx, `
			DELETE FROM presigned_uploads WHERE upload_id IN (
			    SELECT upload_id FROM presigned_uploads WHERE expires_at < now() LIMIT $1)`, s.SweepBatch)
		if err != nil {
			return total, wrap("sweep presigned", err)
		}
		total += int(tag.RowsAffected())
		if int(tag.RowsAffected()) < s.SweepBatch {
			break
		}
	}
	return total, nil
}
