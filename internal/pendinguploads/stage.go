package pendinguploads

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// File is one file of an upload, its bytes in memory.
type File struct {
	Content  []byte
	Filename string // already sanitized: 1..100 bytes
	Mimetype string // already made safe; may be empty
}

// Stage stores files for workspaceID, acting for id, all or none, and
// returns their records in input order. It validates every file before
// any I/O (ErrEmptyContent, ErrTooLarge, ErrEmptyFilename,
// ErrFilenameTooLong inside an *ItemError naming the file;
// ErrTooManyItems), writes the files larger than InlineMaxBytes to the
// bucket (after checking id's token on its own: nothing is written for a
// caller not allowed), then inserts the rows and one activity_logs row
// per file (platforms whose workspaces poll activity_logs learn of the
// upload there) in one round trip, one implicit transaction, with id's
// check. A workspace the database does not know is ErrUnknownWorkspace.
func (s *Store) Stage(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, files []File) ([]Record, error) {
	if len(files) > limits.MaxFiles {
		return nil, ErrTooManyItems
	}
	for i, f := range files {
		if err := validateFile(int64(len(f.Content)), f.Filename, s.FileCap()); err != nil {
			return nil, &ItemError{Index: i, Err: err}
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	recs := make([]Record, len(files))
	contents := make([][]byte, len(files))
	toBucket := false
	for i, f := range files {
		sum := sha256.Sum256(f.Content)
		recs[i] = Record{FileID: uuid.New(), WorkspaceID: workspaceID, Filename: f.Filename,
			Mimetype: f.Mimetype, SizeBytes: int64(len(f.Content)), SHA256: sum[:]}
		if int64(len(f.Content)) <= s.inlineMax() {
			contents[i] = f.Content
			continue
		}
		if s.bucket == nil {
			return nil, &ItemError{Index: i, Err: ErrNoBucket}
		}
		recs[i].s3Key = objectKey(workspaceID, recs[i].FileID)
		toBucket = true
	}
	check, err := s.check(ctx, id, workspaceID)
	if err != nil {
		return nil, err
	}
	q := s.quotaFor(int64(len(recs)), total(recs))
	if toBucket {
		// Nothing goes to the bucket for a caller not allowed, nor over
		// the quota: both checked first, in a round trip of their own.
		if err := s.precheck(ctx, check, q, workspaceID); err != nil {
			return nil, err
		}
		if err := s.writeObjects(ctx, files, recs); err != nil {
			return nil, err
		}
	}
	b := &pgx.Batch{}
	check.Queue(b)
	q.queue(b, check, workspaceID, true)
	cond, args := q.cond(1, 5)
	ins := queueInsert(ctx, b, check, workspaceID, s.TTL, recs, contents, cond, args...)
	if err := s.finish(ctx, b, check, ins, q, recs); err != nil {
		return nil, err
	}
	s.notify(ctx, workspaceID, recs)
	return recs, nil
}

// total is the size of recs' files.
func total(recs []Record) int64 {
	var n int64
	for _, r := range recs {
		n += r.SizeBytes
	}
	return n
}

// precheck checks, in one round trip, that check's identity may act on
// workspaceID and that q fits what waits there now (without the
// workspace's lock: the batch that stores checks it again, exactly).
func (s *Store) precheck(ctx context.Context, check *auth.Check, q *quota, workspaceID uuid.UUID) error {
	b := &pgx.Batch{}
	check.Queue(b)
	q.queue(b, check, workspaceID, false)
	if b.Len() == 0 {
		return nil
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return s.batchError("check", err)
	}
	if err := check.Settle(); err != nil {
		return tokenError(err)
	}
	return q.refusal()
}

// finish sends a staging batch (Stage's or Commit's) and settles it:
// the rows are stored, or nothing is, and then the objects written for
// recs are deleted when that is certain. When the batch ran and stored
// nothing though the token check passed: a *QuotaError when q refused it,
// else errClaimLost (Commit's claim could not take its uploads).
func (s *Store) finish(ctx context.Context, b *pgx.Batch, check *auth.Check, ins *inserted, q *quota, recs []Record) error {
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		// The batch was its own transaction: if its answer was lost it
		// may have committed, and then the objects must stay; the sweep
		// deletes them if it did not (markOrphans).
		if commitOutcomeUnknown(err) {
			s.markOrphans(ctx, recs)
		} else {
			s.discard(ctx, recs)
		}
		return s.batchError("stage", err)
	}
	if err := check.Settle(); err != nil {
		s.discard(ctx, recs)
		return tokenError(err)
	}
	switch ins.n {
	case len(recs):
		return nil
	case 0:
		s.discard(ctx, recs)
		if ins.deadline != nil && !time.Now().Before(*ins.deadline) {
			return wrap("stage", fmt.Errorf("ran after the request's deadline: %w", context.DeadlineExceeded))
		}
		if err := q.refusal(); err != nil {
			return err
		}
		return errClaimLost
	}
	return fmt.Errorf("stage: inserted %d rows, want %d", ins.n, len(recs))
}

// errClaimLost is a staging batch that ran and stored nothing though its
// token check passed: Commit's claim could not take every upload (one
// expired, or another commit took it first).
var errClaimLost = errors.New("claim lost: an upload was gone or taken")

// inserted counts the rows a staging batch's INSERT returned.
type inserted struct {
	recs     map[uuid.UUID]*Record
	deadline *time.Time
	n        int
}

// queueInsert queues the INSERT of recs (the bytes of an inline one in
// contents, nil for one in the bucket) and of their activity rows, as one
// statement, guarded by check; the rows' created_at and expires_at come
// back into recs. With extra, a further condition over its own parameters
// from $5 on (args), the statement inserts only when it holds. Each file
// is a VALUES row of its own parameters: its bytes go to Postgres as one
// bytea, not inside an array Postgres would take apart again.
//
// The statement also inserts nothing once ctx's deadline has passed on
// the server's clock at the start of the transaction (now()): a batch
// written into the socket of a frozen Postgres (SIGSTOP, a stalled host)
// runs when the server resumes, long after its request was answered 503,
// and must not then store the files a retrying client stages again. (A
// freeze in the instant between the server's commit and its answer still
// leaves the outcome unknown; nothing can close that.)
func queueInsert(ctx context.Context, b *pgx.Batch, check *auth.Check, workspaceID uuid.UUID, ttl time.Duration,
	recs []Record, contents [][]byte, extra string, args ...any) *inserted {
	ins := &inserted{recs: make(map[uuid.UUID]*Record, len(recs)), deadline: deadlineOf(ctx)}
	params := append([]any{workspaceID, ttl.Microseconds(), check.Arg(), ins.deadline}, args...)
	rows := make([]string, len(recs))
	for i := range recs {
		r := &recs[i]
		var key *string
		if r.s3Key != "" {
			key = &r.s3Key
		}
		n := len(params)
		rows[i] = fmt.Sprintf("($%d::uuid, $%d::bytea, $%d::text, $%d::bigint, $%d::bytea, $%d::text, $%d::text)",
			n+1, n+2, n+3, n+4, n+5, n+6, n+7)
		params = append(params, r.FileID.String(), contents[i], key, r.SizeBytes, r.SHA256, r.Filename, r.Mimetype)
		ins.recs[r.FileID] = r
	}
	if extra != "" {
		extra = " AND " + extra
	}
	b.Queue(`
		WITH ins AS (
		    INSERT INTO pending_uploads
		        (file_id, workspace_id, content, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		    SELECT v.file_id, $1, v.content, v.s3_key, v.size_bytes, v.sha256, v.filename, v.mimetype,
		           now(), now() + $2::bigint * interval '1 microsecond'
		    FROM (VALUES `+strings.Join(rows, ", ")+`)
		         AS v(file_id, content, s3_key, size_bytes, sha256, filename, mimetype)
		    WHERE ($4::timestamptz IS NULL OR now() <= $4) AND `+check.Guard(3, 1)+extra+`
		    RETURNING file_id, filename, mimetype, size_bytes, created_at, expires_at
		), activity AS (
		    INSERT INTO activity_logs (workspace_id, activity_type, method, target_id, summary, status, request_body)
		    SELECT $1, 'a2a_receive', 'chat_upload_receive', $1, 'chat_upload_receive: ' || filename, 'ok',
		           jsonb_build_object('file_id', file_id, 'name', filename, 'mimeType', mimetype, 'size', size_bytes,
		                              'uri', 'platform-pending:' || $1::text || '/' || file_id::text)
		    FROM ins
		)
		SELECT file_id, created_at, expires_at FROM ins`, params...,
	).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var created, expires time.Time
			if err := rows.Scan((*[16]byte)(&id), &created, &expires); err != nil {
				return err
			}
			if r := ins.recs[id]; r != nil {
				r.CreatedAt, r.ExpiresAt = created, expires
				ins.n++
			}
		}
		return rows.Err()
	})
	return ins
}

// objectConcurrency bounds the parallel writes (or copies) of one batch
// to the bucket.
const objectConcurrency = 4

// writeObjects writes the bucket-held files of recs; on failure it
// deletes what it wrote.
func (s *Store) writeObjects(ctx context.Context, files []File, recs []Record) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(objectConcurrency)
	for i := range recs {
		if recs[i].s3Key == "" {
			continue
		}
		f, key := files[i], recs[i].s3Key
		g.Go(func() error {
			if err := s.bucket.Put(gctx, key, f.Content, f.Mimetype); err != nil {
				return wrap(fmt.Sprintf("stage: file %d: write object", i), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.discard(ctx, recs)
		return err
	}
	return nil
}

// discard deletes, best-effort, the objects written for recs whose rows
// did not commit. It runs even when ctx is already cancelled (bounded by
// CleanupBudget); the sweep removes what it misses.
func (s *Store) discard(ctx context.Context, recs []Record) {
	if s.bucket == nil {
		return
	}
	var keys []string
	for _, r := range recs {
		if r.s3Key != "" {
			keys = append(keys, r.s3Key)
		}
	}
	if len(keys) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupBudget)
	defer cancel()
	_ = s.bucket.Delete(dctx, keys)
}

// markOrphans marks, best-effort within CleanupBudget, the objects of
// recs whose rows may or may not have committed (the batch's answer was
// lost: the deadline, a broken connection): the sweep deletes each one
// whose row does not exist once the batch can no longer commit
// (sweepOrphans). A mark the bucket refuses leaves the object to the
// bucket's backstop rule.
func (s *Store) markOrphans(ctx context.Context, recs []Record) {
	if s.bucket == nil {
		return
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupBudget)
	defer cancel()
	for _, r := range recs {
		if r.s3Key != "" {
			_ = s.bucket.Put(mctx, orphanMarker(r.s3Key), []byte(r.s3Key), "")
		}
	}
}

// CleanupBudget bounds the best-effort work done after a failure
// (discarding the objects written for rows that did not commit), so that
// it never outlives the caller's deadline by much: a Lambda keeps a few
// seconds of margin for it.
const CleanupBudget = 2 * time.Second

// commitOutcomeUnknown reports whether a failed COMMIT may nevertheless
// have committed: the connection broke or the deadline passed after the
// COMMIT was sent. Only when the server said no, or the COMMIT never left,
// is it certain that nothing was stored, and objects written for the rows
// may be discarded; otherwise they must stay.
func commitOutcomeUnknown(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return false
	}
	return true
}

// validateFile checks one file's size and name against the cap and the
// schema.
func validateFile(size int64, filename string, fileCap int64) error {
	switch {
	case size <= 0:
		return ErrEmptyContent
	case size > fileCap:
		return ErrTooLarge
	case filename == "":
		return ErrEmptyFilename
	case len(filename) > MaxFilenameBytes:
		return ErrFilenameTooLong
	}
	return nil
}

// check returns the check of id for a call on workspaceID.
func (s *Store) check(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID) (*auth.Check, error) {
	c, err := s.tokens.For(ctx, id, workspaceID)
	if err != nil {
		return nil, wrap("token check", err)
	}
	return c, nil
}

// batchError wraps the error of a batch that carried a token look-up or
// guard, as wrap does; when the batch met a relation, column or function
// that is gone (the platform's token tables changed under the service),
// the tokens read the schema again at the next call and this one is
// ErrUnavailable: 503, and the retry is checked against the tables as
// they are now, never a 500 for every caller until a restart.
func (s *Store) batchError(op string, err error) error {
	if s.tokens.SchemaChanged(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return wrap(op, err)
}

// tokenError passes a token's refusal through as it is, and wraps a
// failed look-up.
func tokenError(err error) error {
	if errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrNotAllowed) {
		return err
	}
	return wrap("token check", err)
}
