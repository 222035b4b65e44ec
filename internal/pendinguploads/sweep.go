package pendinguploads

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// SweepResult counts the rows one Sweep deleted.
type SweepResult struct {
	Acked   int `json:"acked"`   // acked longer ago than the retention
	Expired int `json:"expired"` // never acked, past expires_at
	// Orphans are objects written for rows that never committed (a
	// request whose answer was lost), deleted by this sweep.
	Orphans int `json:"orphans"`
}

// maxSweepBatches bounds one Sweep: at the default batch size, ten million
// rows. A larger backlog is finished by the next run.
const maxSweepBatches = 10000

// Sweep deletes acked rows whose acked_at is older than ackRetention
// (negative means 0) and unacked rows past expires_at; an acked row goes
// only by its retention, even past expires_at. It deletes in batches of
// SweepBatch rows, each its own short statement, until none are left or
// ctx ends, and returns what it deleted even when it fails part-way.
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
	var errAcked, errExpired, errPresigned, errOrphans error
	res.Acked, errAcked = s.sweepPass(ctx, sweepAcked, ackRetention)
	res.Expired, errExpired = s.sweepPass(ctx, sweepExpired, 0)
	// Expired presigns are bookkeeping: not counted; their staging
	// objects go by the bucket's lifecycle rule.
	_, errPresigned = s.sweepPresigned(ctx)
	res.Orphans, errOrphans = s.sweepOrphans(ctx)
	// Files held back for a scan and expired: counted with the expired.
	scanned, errScanned := s.sweepScanned(ctx)
	res.Expired += scanned
	return res, errors.Join(errAcked, errExpired, errPresigned, errOrphans, errScanned)
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
	name  string
	where string // $1 is the retention in microseconds
}

var (
	sweepAcked = sweepKind{"acked",
		`acked_at IS NOT NULL AND acked_at < now() - $1::bigint * interval '1 microsecond'`}
	sweepExpired = sweepKind{"expired",
		`acked_at IS NULL AND expires_at < now() AND $1::bigint IS NOT NULL`}
)

// sweepPass deletes the rows of one kind, a batch at a time, until a
// batch comes back short, ctx ends, or maxSweepBatches.
func (s *Store) sweepPass(ctx context.Context, kind sweepKind, retention time.Duration) (int, error) {
	once := s.sweepRows
	if s.bucket != nil {
		once = s.sweepRowsAndObjects
	}
	total := 0
	batch := s.SweepBatch
	for i := 0; i < maxSweepBatches; i++ {
		n, err := once(ctx, kind, retention.Microseconds(), batch)
		total += n
		if err != nil {
			return total, wrap("sweep "+kind.name, err)
		}
		if n < batch {
			return total, nil
		}
	}
	return total, nil
}

// sweepRows deletes one batch of eligible rows, in one statement: without
// a bucket, every file's bytes are in its row.
func (s *Store) sweepRows(ctx context.Context, kind sweepKind, retentionMicros int64, batch int) (int, error) {
	tag, err := s.db.Exec(ctx, `
		DELETE FROM pending_uploads WHERE file_id IN (
		    SELECT file_id FROM pending_uploads WHERE `+kind.where+`
		    LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		retentionMicros, batch)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// sweepRowsAndObjects deletes one batch of eligible rows and their
// objects: it reads the batch, deletes the objects, then the rows whose
// objects are gone. A row whose object the bucket refused stays (and the
// pass fails, so the refusal shows); a crash in between leaves rows that
// the next sweep finds again.
func (s *Store) sweepRowsAndObjects(ctx context.Context, kind sweepKind, retentionMicros int64, batch int) (int, error) {
	rows, err := s.db.Query(ctx, `
		SELECT file_id, s3_key FROM pending_uploads WHERE `+kind.where+` LIMIT $2`,
		retentionMicros, batch)
	if err != nil {
		return 0, err
	}
	var ids []uuid.UUID
	var keys []string
	keyOf := map[uuid.UUID]string{}
	for rows.Next() {
		var id uuid.UUID
		var key *string
		if err := rows.Scan(&id, &key); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
		if key != nil {
			keys = append(keys, *key)
			keyOf[id] = *key
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
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
			return 0, fmt.Errorf("delete %d objects: %w", len(keys), err)
		}
	}
	// The predicate again: eligibility only ever grows with time, but a
	// row must never go unless it is eligible at the moment it goes.
	tag, err := s.db.Exec(ctx, `
		DELETE FROM pending_uploads WHERE file_id = ANY($2::uuid[]) AND `+kind.where,
		retentionMicros, uuidArray(ids))
	if err != nil {
		return 0, err
	}
	// Counted, and reported: with a refusal the pass stops here and the
	// sweep fails, so it shows in the metrics and the alarm.
	return int(tag.RowsAffected()), refusedErr
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
