package pendinguploads

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strconv"
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
		if err := validateFile(int64(len(f.Content)), f.Filename, s.MaxFileBytes); err != nil {
			return nil, &ItemError{Index: i, Err: err}
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	a, err := s.access(ctx, id, workspaceID)
	if err != nil {
		return nil, err
	}
	recs, contents, toBucket, err := s.newRecords(workspaceID, files)
	if err != nil {
		return nil, err
	}
	q := s.quotaFor(int64(len(recs)), total(recs))
	if toBucket {
		// Nothing goes to the bucket for a caller not allowed, nor over
		// the quota: both checked first, in a round trip of their own
		// (the count without the workspace's lock: the batch that stores
		// counts again, exactly).
		var check pgx.Batch
		q.queue(&check, a, false)
		if err := a.send(ctx, "check", &check); err != nil {
			return nil, err
		}
		if err := q.refusal(); err != nil {
			return nil, err
		}
		if err := s.writeObjects(ctx, files, recs); err != nil {
			return nil, err
		}
	}
	var b pgx.Batch
	q.queue(&b, a, true)
	ins := s.queueFiles(ctx, &b, a.callerMayAct, recs, contents, nil, q)
	if err := s.finish(ctx, a, &b, ins, q, recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// newRecords returns the records of files, new to workspaceID, and
// beside each the bytes its row holds (nil for a file the bucket holds);
// toBucket says whether any goes to the bucket. A file too large for a row
// without a bucket is ErrNoBucket, inside an *ItemError.
func (s *Store) newRecords(workspaceID uuid.UUID, files []File) (recs []Record, contents [][]byte, toBucket bool, err error) {
	recs = make([]Record, len(files))
	contents = make([][]byte, len(files))
	for i, f := range files {
		sum := sha256.Sum256(f.Content)
		recs[i] = Record{FileID: uuid.New(), WorkspaceID: workspaceID, Filename: f.Filename,
			Mimetype: f.Mimetype, SizeBytes: int64(len(f.Content)), SHA256: sum[:]}
		if int64(len(f.Content)) <= s.inlineMax() {
			contents[i] = f.Content
			continue
		}
		if s.bucket == nil {
			return nil, nil, false, &ItemError{Index: i, Err: ErrNoBucket}
		}
		recs[i].s3Key = objectKey(workspaceID, recs[i].FileID)
		toBucket = true
	}
	return recs, contents, toBucket, nil
}

// inlineMax is the largest file kept in its row.
func (s *Store) inlineMax() int64 {
	if s.Scanned {
		return 0 // the scanner reads objects: every file goes to the bucket
	}
	if s.bucket == nil {
		return s.MaxFileBytes
	}
	return s.InlineMaxBytes
}

// objectKey is the key of a file's object: chosen by the server from IDs,
// never from the file's name. Only the Store writes under objects/.
func objectKey(workspaceID, fileID uuid.UUID) string {
	return fmt.Sprintf("objects/%s/%s", workspaceID, fileID)
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

// quota is one call's check of the per-workspace quota: what one
// workspace may have waiting, unacked and unexpired
// (Store.MaxPendingBytes, Store.MaxPendingFiles; 0 turns either off).
// Stage and Commit hold it exactly: their batch takes the workspace's
// lock before it counts (queue), and the statement that stores counts
// again in its own snapshot (quotaFits), so concurrent calls count one
// after another and together never pass it. Presign checks it early,
// without the lock: a commit may still be refused.
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

// total is the size of recs' files.
func total(recs []Record) int64 {
	var n int64
	for _, r := range recs {
		n += r.SizeBytes
	}
	return n
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

// queue adds to b, for a's caller: with lock, the workspace's lock (held
// to the end of the batch's transaction, taken only for a caller allowed
// on the workspace), then the count of what waits, which the refusal
// reports. The statement that stores must carry quotaFits, which counts
// again in its own snapshot, after the lock.
func (q *quota) queue(b *pgx.Batch, a *access, lock bool) {
	if q == nil {
		return
	}
	if lock {
		// A transaction-level advisory lock per workspace: concurrent
		// stages of one workspace count one after the other.
		b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended(@workspace::text, 7226)) WHERE ` + a.callerMayAct)
	}
	b.Queue(`
		SELECT count(*), coalesce(sum(size_bytes), 0)::bigint FROM (
		    SELECT size_bytes FROM pending_uploads
		    WHERE workspace_id = @workspace AND acked_at IS NULL AND expires_at > now() AND ` + a.callerMayAct + `
		    UNION ALL -- files under scan count (scan.go)
		    SELECT size_bytes FROM scanned_uploads WHERE workspace_id = @workspace AND state IN ('pending', 'held') AND expires_at > now()) w`,
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
		FROM (SELECT size_bytes FROM pending_uploads WHERE workspace_id = @workspace AND acked_at IS NULL AND expires_at > now()
		      UNION ALL SELECT size_bytes FROM scanned_uploads WHERE workspace_id = @workspace AND state IN ('pending', 'held') AND expires_at > now()) w))`

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

// inserted counts the rows a staging batch's INSERT returned.
type inserted struct {
	recs     map[uuid.UUID]*Record
	deadline *time.Time
	n        int
}

// queueInsert queues on b, for a caller whose condition is callerMayAct
// (access), the INSERT of recs (the bytes of an inline
// one in contents, nil for one in the bucket) and of their activity rows,
// as one statement; the rows' created_at and expires_at come back into
// recs. It inserts only when the files fit q (quotaFits) and, for
// Commit, when every presigned upload of uploadIDs (as text: recs[i]
// copied from uploadIDs[i]; none for Stage) is claimed for its file in the same
// transaction (claimedAll). Each file is a VALUES
// row of its own arguments (@file_id_0, @content_0, …): its bytes go to
// Postgres as one bytea, not inside an array Postgres would take apart
// again.
//
// The statement also inserts nothing once ctx's deadline has passed on
// the server's clock at the start of the transaction (now()): a batch
// written into the socket of a frozen Postgres (SIGSTOP, a stalled host)
// runs when the server resumes, long after its request was answered 503,
// and must not then store the files a retrying client stages again. (A
// freeze in the instant between the server's commit and its answer still
// leaves the outcome unknown; nothing can close that.)
func queueInsert(ctx context.Context, b *pgx.Batch, callerMayAct string, ttl time.Duration,
	recs []Record, contents [][]byte, uploadIDs []string, q *quota) *inserted {
	ins := &inserted{recs: make(map[uuid.UUID]*Record, len(recs)), deadline: deadlineOf(ctx)}
	fileIDs := make([]string, len(uploadIDs))
	for i := range uploadIDs {
		fileIDs[i] = recs[i].FileID.String()
	}
	named := q.args(pgx.StrictNamedArgs{"deadline": ins.deadline, "ttl_micros": ttl.Microseconds(),
		"upload_ids": append([]string{}, uploadIDs...), "file_ids": fileIDs})
	rows := make([]string, len(recs))
	for i := range recs {
		r := &recs[i]
		var key *string
		if r.s3Key != "" {
			key = &r.s3Key
		}
		n := strconv.Itoa(i)
		named["file_id_"+n], named["content_"+n], named["s3_key_"+n] = r.FileID.String(), contents[i], key
		named["size_"+n], named["sha256_"+n], named["filename_"+n], named["mimetype_"+n] = r.SizeBytes, r.SHA256, r.Filename, r.Mimetype
		rows[i] = "(@file_id_" + n + "::uuid, @content_" + n + "::bytea, @s3_key_" + n + "::text, @size_" + n + "::bigint, @sha256_" + n +
			"::bytea, @filename_" + n + "::text, @mimetype_" + n + "::text)"
		ins.recs[r.FileID] = r
	}
	b.Queue(`
		WITH ins AS (
		    INSERT INTO pending_uploads
		        (file_id, workspace_id, content, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		    SELECT v.file_id, @workspace, v.content, v.s3_key, v.size_bytes, v.sha256, v.filename, v.mimetype,
		           now(), now() + @ttl_micros::bigint * interval '1 microsecond'
		    FROM (VALUES `+strings.Join(rows, ", ")+`)
		         AS v(file_id, content, s3_key, size_bytes, sha256, filename, mimetype)
		    WHERE (@deadline::timestamptz IS NULL OR now() <= @deadline) AND `+callerMayAct+` AND `+quotaFits+` AND `+claimedAll+`
		    RETURNING file_id, filename, mimetype, size_bytes, created_at, expires_at
		), activity AS (
		    INSERT INTO activity_logs (workspace_id, activity_type, method, target_id, summary, status, request_body)
		    SELECT @workspace, 'a2a_receive', 'chat_upload_receive', @workspace, 'chat_upload_receive: ' || filename, 'ok',
		           jsonb_build_object('file_id', file_id, 'name', filename, 'mimeType', mimetype, 'size', size_bytes,
		                              'uri', 'platform-pending:' || @workspace::text || '/' || file_id::text)
		    FROM ins
		)
		SELECT file_id, created_at, expires_at FROM ins`, named,
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

// deadlineOf is ctx's deadline, or nil.
func deadlineOf(ctx context.Context) *time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return &dl
	}
	return nil
}

// finish sends b, a staging round trip (Stage's or Commit's), for a's
// caller and settles it: the rows are stored, and the Notifier hears of
// them (notify), or nothing is, and then the objects written for recs
// are deleted when that is certain. When the batch ran and stored
// nothing though the caller was allowed: a *QuotaError when q refused it,
// else errClaimLost (Commit's claim could not take its uploads).
func (s *Store) finish(ctx context.Context, a *access, b *pgx.Batch, ins *inserted, q *quota, recs []Record) error {
	if err := a.send(ctx, "stage", b); err != nil {
		// The batch was its own transaction: if its answer was lost it
		// may have committed, and then the objects must stay; the sweep
		// deletes them if it did not (markOrphans).
		if !refused(err) && commitOutcomeUnknown(err) {
			s.markOrphans(ctx, recs)
		} else {
			s.discard(ctx, recs)
		}
		return err
	}
	switch ins.n {
	case len(recs):
		if !s.Scanned { // a scanned file is announced by its verdict (Decide)
			s.notify(ctx, a.ws, recs)
		}
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

// refused reports whether err is a caller's refusal (access.send's verdict), as
// opposed to the database's error.
func refused(err error) bool {
	return errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrNotAllowed)
}

// errClaimLost is a staging batch that ran and stored nothing though its
// token check passed: Commit's claim could not take every upload (one
// expired, or another commit took it first).
var errClaimLost = errors.New("claim lost: an upload was gone or taken")

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

// orphanPrefix holds a marker for each object written for rows whose
// commit could not be told (markOrphans): orphans/<workspace>/<file> for
// objects/<workspace>/<file>.
const orphanPrefix = "orphans/"

func orphanMarker(objectKey string) string {
	return orphanPrefix + strings.TrimPrefix(objectKey, "objects/")
}

// CleanupBudget bounds the best-effort work done after a failure
// (discarding the objects written for rows that did not commit), so that
// it never outlives the caller's deadline by much: a Lambda keeps a few
// seconds of margin for it.
const CleanupBudget = 2 * time.Second

// notify tells the Notifier, if any, of recs (one workspace's), once
// their transaction committed (finish).
func (s *Store) notify(ctx context.Context, workspaceID uuid.UUID, recs []Record) {
	if s.Notifier == nil || len(recs) == 0 {
		return
	}
	ids := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		ids[i] = r.FileID
	}
	s.Notifier.Notify(ctx, workspaceID, ids)
}
