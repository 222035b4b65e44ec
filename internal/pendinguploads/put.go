package pendinguploads

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"
)

// PutItem is one file of a batch. Either Content holds the bytes, or
// InBucket says the caller already placed them in the blob store at
// ObjectKey(workspaceID, FileID) (a committed presigned upload), with
// Size and SHA256 as measured from that very object.
type PutItem struct {
	Content  []byte
	Filename string // already sanitized: 1..100 bytes
	Mimetype string // already made safe; may be empty

	InBucket bool
	FileID   uuid.UUID // with InBucket: the ID the object was placed under
	Size     int64
	SHA256   []byte
}

func (it PutItem) size() int64 {
	if it.InBucket {
		return it.Size
	}
	return int64(len(it.Content))
}

// Put stages one file for workspaceID; see PutBatch.
func (s *Store) Put(ctx context.Context, workspaceID uuid.UUID, content []byte, filename, mimetype string) (Record, error) {
	recs, err := s.PutBatch(ctx, workspaceID, []PutItem{{Content: content, Filename: filename, Mimetype: mimetype}})
	if err != nil {
		return Record{}, err
	}
	return recs[0], nil
}

// PutBatch stages items for workspaceID atomically: every row commits or
// none does. It validates every item before any I/O (ErrEmptyContent,
// ErrTooLarge, ErrEmptyFilename, ErrFilenameTooLong, ErrTooManyItems,
// each inside an *ItemError naming the item), writes large items to the
// blob store, and inserts all rows in one statement, one round trip: the
// statement is its own transaction. Records come back in input order,
// without Content.
func (s *Store) PutBatch(ctx context.Context, workspaceID uuid.UUID, items []PutItem) ([]Record, error) {
	return s.stage(ctx, s.db, workspaceID, items, false)
}

// Stage is PutBatch plus one activity_logs row per file (see
// InsertActivityTx), all in one round trip and one transaction: the upload
// handler's write. With claim (claim[i] the upload items[i], InBucket,
// was placed from), the same transaction first consumes those presigned
// uploads (see ClaimPresignedTx), and Stage returns its *ClaimError (an
// ErrNotFound), storing nothing, when any is gone.
func (s *Store) Stage(ctx context.Context, workspaceID uuid.UUID, items []PutItem, claim []uuid.UUID) ([]Record, error) {
	if len(claim) == 0 {
		return s.stage(ctx, s.db, workspaceID, items, true)
	}
	if err := validate(items, s.FileCap()); err != nil {
		return nil, err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		s.DiscardBlobs(ctx, s.placed(workspaceID, items))
		return nil, wrap("stage: begin", err)
	}
	defer Rollback(ctx, tx)
	fileIDs := make([]uuid.UUID, len(items))
	for i, it := range items {
		fileIDs[i] = it.FileID
	}
	if err := ClaimPresignedTx(ctx, tx, workspaceID, claim, fileIDs); err != nil {
		s.DiscardBlobs(ctx, s.placed(workspaceID, items))
		return nil, err
	}
	recs, err := s.stage(ctx, tx, workspaceID, items, true)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		if !CommitOutcomeUnknown(err) {
			s.DiscardBlobs(ctx, recs)
		}
		return nil, wrap("stage: commit", err)
	}
	return recs, nil
}

// PutBatchTx is PutBatch inside the caller's transaction, so the rows can
// commit together with the caller's own writes (the activity rows). It
// never commits or rolls back. Validation still comes before any I/O.
//
// Items bound for the blob store are written before the INSERT. If the
// caller ends up rolling back, it should call DiscardBlobs with the
// returned records; objects that escape even that (a crash) are removed by
// the bucket's backstop lifecycle rule.
func (s *Store) PutBatchTx(ctx context.Context, tx pgx.Tx, workspaceID uuid.UUID, items []PutItem) ([]Record, error) {
	return s.stage(ctx, tx, workspaceID, items, false)
}

// batcher sends a pgx.Batch: the pool (one implicit transaction) or a tx.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// stage validates, writes blobs, then sends the rows (and the activity
// rows) as one batch on db. On the pool, a batch is one implicit
// transaction; in a tx, it is part of the caller's.
func (s *Store) stage(ctx context.Context, db batcher, workspaceID uuid.UUID, items []PutItem, activity bool) ([]Record, error) {
	if err := validate(items, s.FileCap()); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, nil
	}
	recs, err := s.prepare(workspaceID, items)
	if err != nil {
		s.DiscardBlobs(ctx, s.placed(workspaceID, items))
		return nil, err
	}
	if err := s.writeBlobs(ctx, items, recs); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	queueDeadlineGuard(ctx, b)
	got := s.queueInsert(b, workspaceID, items, recs)
	if activity {
		if err := queueActivity(b, recs); err != nil {
			s.DiscardBlobs(ctx, recs)
			return nil, err
		}
	}
	err = db.SendBatch(ctx, b).Close()
	if err == nil && *got != len(recs) {
		err = fmt.Errorf("inserted %d rows, want %d", *got, len(recs))
	}
	if err != nil {
		// On the pool the batch was its own transaction: if its answer was
		// lost it may have committed, and then the objects must stay.
		if _, inTx := db.(pgx.Tx); inTx || !CommitOutcomeUnknown(err) {
			s.DiscardBlobs(ctx, recs)
		}
		return nil, wrap("put batch", err)
	}
	return recs, nil
}

// prepare makes the records of items: IDs, digests, and where each
// file's bytes go.
func (s *Store) prepare(workspaceID uuid.UUID, items []PutItem) ([]Record, error) {
	recs := make([]Record, len(items))
	for i, it := range items {
		recs[i] = Record{
			FileID:      it.FileID,
			WorkspaceID: workspaceID,
			Filename:    it.Filename,
			Mimetype:    it.Mimetype,
			SizeBytes:   it.size(),
			SHA256:      it.SHA256,
		}
		if !it.InBucket {
			recs[i].FileID = s.newID()
			sum := sha256.Sum256(it.Content)
			recs[i].SHA256 = sum[:]
		}
		if it.InBucket || int64(len(it.Content)) > s.inlineMax() {
			if s.Blobs == nil {
				return nil, &ItemError{Index: i, Err: ErrNoBlobs}
			}
			recs[i].S3Key = ObjectKey(workspaceID, recs[i].FileID)
		}
	}
	return recs, nil
}

// placed returns records naming the objects the caller already put in the
// bucket for items, so that a failure before prepare can discard them.
func (s *Store) placed(workspaceID uuid.UUID, items []PutItem) []Record {
	var recs []Record
	for _, it := range items {
		if it.InBucket {
			recs = append(recs, Record{S3Key: ObjectKey(workspaceID, it.FileID)})
		}
	}
	return recs
}

// deadlineGuardMark is in the error of queueDeadlineGuard's statement.
const deadlineGuardMark = "request deadline passed"

// queueDeadlineGuard queues, when ctx has a deadline, a statement that
// fails once that deadline has passed on the server's clock, so that the
// batch's implicit transaction stores nothing. A batch written into the
// socket of a frozen Postgres (SIGSTOP, a stalled host) runs when the
// server resumes, long after its request was answered 503: without the
// guard it would then commit, and a client retrying the 503 would stage
// the files twice. (A freeze in the instant between the server's commit
// and its answer still leaves the outcome unknown; nothing can close that.)
// The CASE is volatile, so the cast is evaluated only at run time.
func queueDeadlineGuard(ctx context.Context, b *pgx.Batch) {
	if dl, ok := ctx.Deadline(); ok {
		b.Queue(`SELECT (CASE WHEN clock_timestamp() > $1 THEN '`+deadlineGuardMark+`' END)::int`, dl)
	}
}

// queueInsert queues the INSERT of recs and fills their created_at and
// expires_at when the batch runs; *got counts the rows that came back.
// One row takes a plain VALUES insert; several go through unnest, one
// statement either way.
func (s *Store) queueInsert(b *pgx.Batch, workspaceID uuid.UUID, items []PutItem, recs []Record) *int {
	n := len(recs)
	ids := make([]uuid.UUID, n)
	contents := make([][]byte, n)
	keys := make([]*string, n)
	sizes := make([]int64, n)
	sums := make([][]byte, n)
	names := make([]string, n)
	types := make([]string, n)
	for i, r := range recs {
		ids[i], sizes[i], sums[i], names[i], types[i] = r.FileID, r.SizeBytes, r.SHA256, r.Filename, r.Mimetype
		if r.S3Key != "" {
			keys[i] = &recs[i].S3Key
		} else {
			contents[i] = items[i].Content
		}
	}
	const returning = ` RETURNING file_id, created_at, expires_at`
	var sql string
	var args []any
	if n == 1 {
		sql = `INSERT INTO pending_uploads
		    (file_id, workspace_id, content, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		VALUES ($2, $1, $3, $4, $5, $6, $7, $8, now(), now() + $9::bigint * interval '1 microsecond')` + returning
		args = []any{workspaceID, ids[0], contents[0], keys[0], sizes[0], sums[0], names[0], types[0], s.ttl().Microseconds()}
	} else {
		sql = `INSERT INTO pending_uploads
		    (file_id, workspace_id, content, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		SELECT u.file_id, $1, u.content, u.s3_key, u.size_bytes, u.sha256, u.filename, u.mimetype,
		       now(), now() + $9::bigint * interval '1 microsecond'
		FROM unnest($2::uuid[], $3::bytea[], $4::text[], $5::bigint[], $6::bytea[], $7::text[], $8::text[])
		     AS u(file_id, content, s3_key, size_bytes, sha256, filename, mimetype)` + returning
		args = []any{workspaceID, ids, contents, keys, sizes, sums, names, types, s.ttl().Microseconds()}
	}
	byID := make(map[uuid.UUID]*Record, n)
	for i := range recs {
		byID[recs[i].FileID] = &recs[i]
	}
	got := new(int)
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var created, expires time.Time
			if err := rows.Scan(&id, &created, &expires); err != nil {
				return err
			}
			if r := byID[id]; r != nil {
				r.CreatedAt, r.ExpiresAt = created, expires
				*got++
			}
		}
		return rows.Err()
	})
	return got
}

// blobConcurrency bounds the parallel writes of one batch to the blob store.
const blobConcurrency = 4

func (s *Store) writeBlobs(ctx context.Context, items []PutItem, recs []Record) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(blobConcurrency)
	for i := range recs {
		if recs[i].S3Key == "" || items[i].InBucket {
			continue
		}
		it, key := items[i], recs[i].S3Key
		g.Go(func() error {
			if err := s.Blobs.Put(gctx, key, it.Content, it.Mimetype); err != nil {
				return wrap(fmt.Sprintf("put batch: item %d: write blob", i), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.DiscardBlobs(ctx, recs)
		return err
	}
	return nil
}

// DiscardBlobs deletes, best-effort, the objects written for recs. Callers
// of PutBatchTx use it when their transaction does not commit. It runs
// even when ctx is already cancelled (bounded by its own timeout).
func (s *Store) DiscardBlobs(ctx context.Context, recs []Record) {
	if s.Blobs == nil {
		return
	}
	var keys []string
	for _, r := range recs {
		if r.S3Key != "" {
			keys = append(keys, r.S3Key)
		}
	}
	if len(keys) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupBudget)
	defer cancel()
	_ = s.Blobs.Delete(dctx, keys) // the backstop lifecycle rule catches what this misses
}

// CleanupBudget bounds the best-effort work done after a failure (a
// rollback, discarding objects), so that it never outlives the caller's
// deadline by much: a Lambda keeps a few seconds of margin for it.
const CleanupBudget = 2 * time.Second

// Rollback rolls tx back, best-effort, within CleanupBudget, even when ctx
// is already done. After a commit it does nothing.
func Rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupBudget)
	defer cancel()
	_ = tx.Rollback(rctx)
}

// CommitOutcomeUnknown reports whether a failed COMMIT may nevertheless
// have committed: the connection broke or the deadline passed after the
// COMMIT was sent. Only when the server said no, or the COMMIT never left,
// is it certain that nothing was stored, and objects written for the rows
// may be discarded; otherwise they must stay (the lifecycle rule removes
// them if the rows indeed did not commit).
func CommitOutcomeUnknown(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return false
	}
	return true
}

func validate(items []PutItem, fileCap int64) error {
	if len(items) > MaxBatch {
		return ErrTooManyItems
	}
	for i, it := range items {
		var err error
		switch {
		case it.InBucket && it.Content != nil:
			err = errors.New("both content and an object in the bucket")
		case it.InBucket && (it.FileID == uuid.Nil || len(it.SHA256) != sha256.Size):
			err = errors.New("object in the bucket without its file ID or SHA-256")
		case it.size() <= 0:
			err = ErrEmptyContent
		case it.size() > fileCap:
			err = ErrTooLarge
		case it.Filename == "":
			err = ErrEmptyFilename
		case len(it.Filename) > MaxFilenameBytes:
			err = ErrFilenameTooLong
		}
		if err != nil {
			return &ItemError{Index: i, Err: err}
		}
	}
	return nil
}
