package pendinguploads

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
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
	err = s.finish(ctx, a, q, recs, func(b *pgx.Batch) *inserted {
		q.queue(b, a, true)
		return s.queueFiles(ctx, b, a.callerMayAct, recs, contents, nil, q)
	})
	if err != nil {
		return nil, s.unknownWorkspace(ctx, a, err)
	}
	return recs, nil
}

// knownWorkspace is the condition, beside callerMayAct in the statements
// that store files, that the database knows @workspace, or that the Store
// does not ask (@refuse_unknown false: ACCEPT_UNKNOWN_WORKSPACES): on the
// platform's database (it has workspaces) always, its foreign key
// deciding; on the service's own, when a token was ever made for it.
const knownWorkspace = `(NOT @refuse_unknown::boolean OR to_regclass('workspaces') IS NOT NULL
		    OR EXISTS (SELECT 1 FROM workspace_auth_tokens WHERE workspace_id = @workspace))`

// unknownWorkspace is err, a staging batch's, or ErrUnknownWorkspace when
// the batch stored nothing (errClaimLost) because its workspace is not
// known (knownWorkspace); it asks the database only then.
func (s *Store) unknownWorkspace(ctx context.Context, a *access, err error) error {
	if !s.RefuseUnknownWorkspaces || !errors.Is(err, errClaimLost) {
		return err
	}
	var b pgx.Batch
	known := true
	b.Queue(`SELECT `+knownWorkspace+` WHERE `+a.callerMayAct, pgx.StrictNamedArgs{"refuse_unknown": true}).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&known)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if serr := a.send(ctx, "stage: workspace", &b); serr != nil {
		return serr
	}
	if !known {
		return fmt.Errorf("stage: %w: no token was ever made for it", ErrUnknownWorkspace)
	}
	return err
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
// lock (queue), and then the statement that stores counts in its own
// snapshot (queueInsert's pending; Commit's claim too, quotaFits), so concurrent
// calls count one after another and together never pass it. Presign
// checks it early, without the lock: a commit may still be refused.
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
// on the workspace, waited for at most lockWait: see Store.finish), and
// then the statement that stores (queueInsert) counts what waits, once,
// in its own snapshot after the lock, and returns the count the refusal
// reports; without, the count of what waits (an early check: Presign, and
// Stage before it writes to the bucket).
func (q *quota) queue(b *pgx.Batch, a *access, lock bool) {
	if q == nil {
		return
	}
	if lock {
		// The wait for the lock is bounded: past lock_timeout the batch
		// fails (SQLSTATE 55P03) and gives its connection back; finish
		// tries again later, without one. The setting holds to the end
		// of this transaction only.
		b.Queue(`SELECT set_config('lock_timeout', @lock_wait::text, true) WHERE `+a.callerMayAct,
			pgx.StrictNamedArgs{"lock_wait": strconv.FormatInt(a.s.lockWait().Milliseconds(), 10) + "ms"})
		// A transaction-level advisory lock per workspace: concurrent
		// stages of one workspace count one after the other.
		b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended(@workspace::text, 7226)) WHERE ` + a.callerMayAct)
		return // the statement that stores counts (queueInsert's pending)
	}
	args := q.args(pgx.StrictNamedArgs{})
	delete(args, "quota_off") // a quota is on: the count names the rest (totalFits)
	b.Queue(`SELECT `+pendingCount+` WHERE `+a.callerMayAct, args).QueryRow(func(row pgx.Row) error {
		q.measured = true
		return row.Scan(&q.pending.files, &q.pending.bytes)
	})
}

// pendingFiles and pendingBytes are the count and size of what waits in
// @workspace: unacked, unexpired rows. Each is the workspace's running
// total (pending_upload_totals: every unacked row not yet swept, kept by
// the statements that stage, ack and sweep) less its rows past expires_at
// that the sweep has not yet deleted, counted from
// idx_pending_uploads_workspace_pending (the range expires_at <= now()).
// So the quota reads one row of the totals and what the sweep has not yet
// reached, however much waits; never below 0 (a total that drifted:
// docs/operating.md). Each is a scalar subquery, read where callerMayAct
// holds. The expired rows are a range of either index that holds them:
// idx_pending_uploads_workspace_pending (this workspace's), or, when the
// planner finds few rows expired at all, idx_pending_uploads_expires
// (every workspace's not yet swept): either way what the sweep has not
// yet reached, never what waits. (A row comparison (workspace_id,
// expires_at) <= (@workspace, now()) would pin the first index, but a
// B-tree ends such a scan only at the workspace's last entry: every
// pending row read again.)
//
// Files under a malware scan (scan.go) count too: waitingScanFiles and
// waitingScanBytes add those of scanned_uploads still pending or held,
// from idx_scanned_uploads_workspace_waiting (what waits for a verdict,
// not what waits for the workspace).
//
// Expired rows are counted only when they matter: while what the call
// adds fits under the total alone (totalFits: expired rows included, so
// the true count is no more), the total is the answer, and no expired row
// is read; only a call that would not fit by the total reads the
// workspace's expired rows, which may make room. So a workspace below its
// quota pays nothing for what the sweep has not reached.
const (
	totalFiles = `coalesce((SELECT t.files FROM pending_upload_totals t WHERE t.workspace_id = @workspace), 0)`
	totalBytes = `coalesce((SELECT t.bytes FROM pending_upload_totals t WHERE t.workspace_id = @workspace), 0)`
	totalFits  = `(` + totalFiles + ` + ` + waitingScanFiles + ` + @quota_files::bigint <= @quota_max_files::bigint
		    AND ` + totalBytes + ` + ` + waitingScanBytes + ` + @quota_bytes::bigint <= @quota_max_bytes::bigint)`
	pendingFiles = `(CASE WHEN ` + totalFits + ` THEN ` + totalFiles + ` ELSE greatest(` + totalFiles + `
		    - (SELECT count(*) FROM pending_uploads
		       WHERE workspace_id = @workspace AND acked_at IS NULL AND expires_at <= now()), 0) END + ` + waitingScanFiles + `)`
	pendingBytes = `(CASE WHEN ` + totalFits + ` THEN ` + totalBytes + ` ELSE greatest(` + totalBytes + `
		    - (SELECT coalesce(sum(size_bytes), 0) FROM pending_uploads
		       WHERE workspace_id = @workspace AND acked_at IS NULL AND expires_at <= now()), 0) END::bigint + ` + waitingScanBytes + `)`
)

// pendingCount is the early check's count (quota.queue without the
// lock): one row, (0, 0) for a caller not allowed.
const pendingCount = `coalesce(max(` + pendingFiles + `), 0)::bigint, coalesce(max(` + pendingBytes + `), 0)::bigint`

// waitingScanFiles and waitingScanBytes are the count and size of the
// files of @workspace that wait for a malware scan's verdict (pending,
// or held for an operator) and have not expired: scalar subqueries,
// which the quota's counts add to pending_uploads' (pendingCount,
// quotaFits, queueInsert's pending). Each sits inside a level that names
// callerMayAct; a deployment that does not scan has no such rows.
const (
	waitingScanFiles = `(SELECT count(*) FROM scanned_uploads
		WHERE workspace_id = @workspace AND state IN ('pending', 'held') AND expires_at > now())`
	waitingScanBytes = `(SELECT coalesce(sum(size_bytes), 0)::bigint FROM scanned_uploads
		WHERE workspace_id = @workspace AND state IN ('pending', 'held') AND expires_at > now())`
)

// fitsPending is quotaFits over the count of the statement that stores
// (queueInsert's pending).
const fitsPending = `(@quota_off::boolean OR (SELECT files + @quota_files::bigint <= @quota_max_files::bigint
		    AND bytes + @quota_bytes::bigint <= @quota_max_bytes::bigint FROM pending))`

// quotaFits is the condition, named where a statement that stores
// uses it, that what a call adds fits the workspace's quota, counted in
// the statement's own snapshot (pendingFiles, pendingBytes): over
// @quota_off (no quota: the count is skipped), @quota_files, @quota_bytes
// (what the call adds), @quota_max_files, @quota_max_bytes and @workspace
// (quota.args binds them).
const quotaFits = `(@quota_off::boolean OR (` + pendingFiles + ` + @quota_files::bigint <= @quota_max_files::bigint
		    AND ` + pendingBytes + ` + @quota_bytes::bigint <= @quota_max_bytes::bigint))`

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
// recs. It inserts only when the workspace is known, where refuseUnknown
// asks (knownWorkspace), when the files fit q (quotaFits) and, for
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
func queueInsert(ctx context.Context, b *pgx.Batch, callerMayAct string, refuseUnknown bool, ttl time.Duration,
	recs []Record, contents [][]byte, uploadIDs []string, q *quota) *inserted {
	ins := &inserted{recs: make(map[uuid.UUID]*Record, len(recs)), deadline: deadlineOf(ctx)}
	fileIDs := make([]string, len(uploadIDs))
	for i := range uploadIDs {
		fileIDs[i] = recs[i].FileID.String()
	}
	named := q.args(pgx.StrictNamedArgs{"deadline": ins.deadline, "ttl_micros": ttl.Microseconds(),
		"upload_ids": append([]string{}, uploadIDs...), "file_ids": fileIDs, "refuse_unknown": refuseUnknown})
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
		-- pending: what waits in @workspace (pendingCount: its running
		-- total less its expired rows not yet swept), counted once, in this
		-- statement's snapshot: fitsPending decides on it, and the
		-- statement returns it for the refusal; nothing is counted without
		-- a quota, nor for a caller not allowed ((0, 0)).
		WITH pending(files, bytes) AS MATERIALIZED (
		    SELECT `+pendingCount+`
		    WHERE NOT @quota_off::boolean AND (SELECT `+callerMayAct+`)
		), ins AS (
		    INSERT INTO pending_uploads
		        (file_id, workspace_id, content, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		    SELECT v.file_id, @workspace, v.content, v.s3_key, v.size_bytes, v.sha256, v.filename, v.mimetype,
		           now(), now() + @ttl_micros::bigint * interval '1 microsecond'
		    FROM (VALUES `+strings.Join(rows, ", ")+`)
		         AS v(file_id, content, s3_key, size_bytes, sha256, filename, mimetype)
		    WHERE (@deadline::timestamptz IS NULL OR now() <= @deadline) AND `+callerMayAct+` AND `+knownWorkspace+`
		      AND `+fitsPending+` AND `+claimedAll+`
		    RETURNING file_id, filename, mimetype, size_bytes, created_at, expires_at
		), activity AS (
		    INSERT INTO activity_logs (workspace_id, activity_type, method, target_id, summary, status, request_body)
		    SELECT @workspace, 'a2a_receive', 'chat_upload_receive', @workspace, 'chat_upload_receive: ' || filename, 'ok',
		           jsonb_build_object('file_id', file_id, 'name', filename, 'mimeType', mimetype, 'size', size_bytes,
		                              'uri', 'platform-pending:' || @workspace::text || '/' || file_id::text)
		    FROM ins
		), total AS (
		    -- The workspace's running total, in the statement that stores:
		    -- its rows and their count commit together, or neither does.
		    -- max_ttl only grows: the list's lower bound on created_at.
		    INSERT INTO pending_upload_totals AS t (workspace_id, files, bytes, max_ttl)
		    SELECT @workspace, count(*), coalesce(sum(size_bytes), 0), max(expires_at - created_at) FROM ins HAVING count(*) > 0
		    ON CONFLICT (workspace_id) DO UPDATE SET files = t.files + excluded.files, bytes = t.bytes + excluded.bytes,
		        max_ttl = greatest(t.max_ttl, excluded.max_ttl)
		)
		SELECT ins.file_id, ins.created_at, ins.expires_at, pending.files, pending.bytes
		FROM pending LEFT JOIN ins ON true`, named,
	).Query(ins.read(q))
	return ins
}

// read reads the answer of a statement that stores (queueInsert's,
// queueScanned's): a row per file stored (its id, created_at,
// expires_at), each beside what the statement counted as pending, which
// q keeps for a refusal; the row of pending alone when nothing was
// stored.
func (ins *inserted) read(q *quota) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		for rows.Next() {
			var id *[16]byte
			var created, expires *time.Time
			var files, bytes int64
			if err := rows.Scan(&id, &created, &expires, &files, &bytes); err != nil {
				return err
			}
			if q != nil {
				q.measured, q.pending.files, q.pending.bytes = true, files, bytes
			}
			if id == nil || created == nil || expires == nil {
				continue // nothing stored: the row of pending alone
			}
			if r := ins.recs[uuid.UUID(*id)]; r != nil {
				r.CreatedAt, r.ExpiresAt = *created, *expires
				ins.n++
			}
		}
		return rows.Err()
	}
}

// deadlineOf is ctx's deadline, or nil.
func deadlineOf(ctx context.Context) *time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return &dl
	}
	return nil
}

// finish sends the staging round trip (Stage's or Commit's) that build
// queues, for a's caller, and settles it: the rows are stored, and the
// Notifier hears of them (notify), or nothing is, and then the objects
// written for recs are deleted when that is certain. When the batch ran
// and stored nothing though the caller was allowed: a *QuotaError when q
// refused it, else errClaimLost (Commit's claim could not take its
// uploads).
//
// While another transaction holds the workspace's lock, a try waits for
// it at most lockWait, holding its connection; then the batch fails,
// having stored nothing, and its connection goes back to the pool. finish
// builds and sends it again after a pause (holding no connection), up to
// lockTries tries in all, and then returns ErrWorkspaceBusy (HTTP: 503
// with Retry-After).
func (s *Store) finish(ctx context.Context, a *access, q *quota, recs []Record, build func(*pgx.Batch) *inserted) error {
	var ins *inserted
	// Under a quota the workspace's calls take turns: first in this
	// process, waiting in memory (turns: no connection held), then in the
	// database (tryLocked), against other processes.
	release := func() {}
	var err error
	if q != nil {
		release, err = s.turns.take(ctx, a.ws, DefaultTurnWait)
	}
	if err == nil {
		err = s.tryLocked(ctx, func() error {
			var b pgx.Batch
			ins = build(&b)
			return a.send(ctx, "stage", &b)
		})
		release()
	}
	if err != nil {
		// The batch was its own transaction: if its answer was lost it
		// may have committed, and then the objects must stay; the sweep
		// deletes them if it did not (markOrphans).
		if !refused(err) && !errors.Is(err, ErrWorkspaceBusy) && commitOutcomeUnknown(err) {
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
	return errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrNotAllowed) || errors.Is(err, auth.ErrUnanchored)
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

// Waiting for a workspace's lock (Settings.LockWait, Settings.LockTries):
// a try waits at most DefaultLockWait holding its connection, then pauses
// 5 to 15 times that holding none, so that callers waiting on a busy
// workspace hold the pool's connections for a small part of their wait
// (a try of 100 ms held them half the time, and 50 uploads into one
// workspace starved every other workspace of connections: make scale's
// fairness). 60 tries: about 3 s in all.
const (
	DefaultLockWait  = 5 * time.Millisecond
	DefaultLockTries = 60
)

func (s *Store) lockWait() time.Duration {
	if s.LockWait > 0 {
		return max(s.LockWait, time.Millisecond)
	}
	return DefaultLockWait
}

// tryLocked runs send, a round trip that takes a workspace's lock with a
// bounded wait (quota.queue), up to lockTries times while it fails for
// the wait (SQLSTATE 55P03, lock_not_available: nothing was stored),
// pausing between tries a random 5 to 15 times lockWait without a
// connection. It returns ErrWorkspaceBusy after the last, or when ctx
// ends during a pause.
func (s *Store) tryLocked(ctx context.Context, send func() error) error {
	tries := s.LockTries
	if tries <= 0 {
		tries = DefaultLockTries
	}
	for try := 1; ; try++ {
		err := send()
		if !lockNotAvailable(err) {
			return err
		}
		if try >= tries {
			return fmt.Errorf("stage: %w (%d tries of %v): %w", ErrWorkspaceBusy, tries, s.lockWait(), err)
		}
		pause := time.NewTimer(s.lockWait() * time.Duration(5+rand.N(11)))
		select {
		case <-ctx.Done():
			pause.Stop()
			return fmt.Errorf("stage: %w (its turn did not come before the call's end): %w", ErrWorkspaceBusy, ctx.Err())
		case <-pause.C:
		}
	}
}

// lockNotAvailable reports whether err is Postgres's lock_not_available
// (SQLSTATE 55P03): a wait for a lock passed lock_timeout.
func lockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
