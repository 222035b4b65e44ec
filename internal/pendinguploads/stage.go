package pendinguploads

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"
)

// File is one file of an upload, its bytes in memory.
type File struct {
	Content  []byte
	Filename string // already sanitized: 1..100 bytes
	Mimetype string // already made safe; may be empty
}

// item is one file on its way to a row: either its bytes in memory, or
// (inBucket) an object a commit already placed at objectKey(workspace,
// fileID), with size and sha256 measured from that very object.
type item struct {
	File
	inBucket bool
	fileID   uuid.UUID
	size     int64
	sha256   []byte
}

func (it item) length() int64 {
	if it.inBucket {
		return it.size
	}
	return int64(len(it.Content))
}

// Stage stores files for workspaceID, for c (see Caller), all or none,
// and returns their records in input order. It validates every file
// before any I/O (ErrEmptyContent, ErrTooLarge, ErrEmptyFilename,
// ErrFilenameTooLong inside an *ItemError naming the file;
// ErrTooManyItems), writes the files larger than InlineMaxBytes to the
// bucket (after checking c's token on its own: nothing is written for a
// caller not allowed), then inserts the rows and one activity_logs row
// per file (platforms whose workspaces poll activity_logs learn of the
// upload there) in one round trip, one implicit transaction. A workspace
// the database does not know is ErrUnknownWorkspace.
func (s *Store) Stage(ctx context.Context, c *Caller, workspaceID uuid.UUID, files []File) ([]Record, error) {
	items := make([]item, len(files))
	for i, f := range files {
		items[i] = item{File: f}
	}
	return s.stage(ctx, c, workspaceID, items, nil)
}

// stage validates, writes objects, then sends the rows and their activity
// rows as one batch, one implicit transaction. With claim (claim[i] the
// presigned upload items[i] was placed from, see Commit), the batch first
// consumes those uploads, and fails with a *claimError, storing nothing,
// unless it took them all.
func (s *Store) stage(ctx context.Context, c *Caller, workspaceID uuid.UUID, items []item, claim []uuid.UUID) ([]Record, error) {
	if err := validate(items, s.FileCap()); err != nil {
		s.discard(ctx, s.placed(workspaceID, items))
		return nil, err
	}
	if len(items) == 0 {
		return nil, nil
	}
	recs, err := s.prepare(workspaceID, items)
	if err != nil {
		s.discard(ctx, s.placed(workspaceID, items))
		return nil, err
	}
	for i := range recs {
		if recs[i].s3Key != "" && !items[i].inBucket {
			if err := s.verify(ctx, c, workspaceID); err != nil {
				return nil, err
			}
			break
		}
	}
	if err := s.writeObjects(ctx, items, recs); err != nil {
		return nil, err
	}
	b := &stageBatch{}
	b.addDeadlineGuard(ctx)
	look := b.addLookup(c)
	if len(claim) > 0 {
		fileIDs := make([]uuid.UUID, len(recs))
		for i, r := range recs {
			fileIDs[i] = r.FileID
		}
		b.addClaim(workspaceID, claim, fileIDs)
	}
	got := b.addInsert(c, workspaceID, items, recs, s.ttl())
	if err := b.addActivity(c, workspaceID, recs); err != nil {
		s.discard(ctx, recs)
		return nil, err
	}
	err = b.send(ctx, s.db)
	if err == nil {
		if err = look.settle(workspaceID); err == nil && *got != len(recs) {
			err = fmt.Errorf("inserted %d rows, want %d", *got, len(recs))
		}
	}
	if err != nil {
		// The batch was its own transaction: if its answer was lost it may
		// have committed, and then the objects must stay.
		if !commitOutcomeUnknown(err) {
			s.discard(ctx, recs)
		}
		if isClaimLost(err) {
			return nil, &claimError{}
		}
		if errors.Is(err, ErrTokenInvalid) || errors.Is(err, ErrTokenNotForWorkspace) {
			return nil, err
		}
		return nil, wrap("stage", err)
	}
	return recs, nil
}

// prepare makes the records of items: IDs, digests, and where each
// file's bytes go.
func (s *Store) prepare(workspaceID uuid.UUID, items []item) ([]Record, error) {
	recs := make([]Record, len(items))
	for i, it := range items {
		recs[i] = Record{
			FileID:      it.fileID,
			WorkspaceID: workspaceID,
			Filename:    it.Filename,
			Mimetype:    it.Mimetype,
			SizeBytes:   it.length(),
			SHA256:      it.sha256,
		}
		if !it.inBucket {
			recs[i].FileID = uuid.New()
			sum := sha256.Sum256(it.Content)
			recs[i].SHA256 = sum[:]
		}
		if it.inBucket || int64(len(it.Content)) > s.inlineMax() {
			if s.bucket == nil {
				return nil, &ItemError{Index: i, Err: ErrNoBucket}
			}
			recs[i].s3Key = objectKey(workspaceID, recs[i].FileID)
		}
	}
	return recs, nil
}

// placed returns records naming the objects a commit already placed for
// items, so that a failure before prepare can discard them.
func (s *Store) placed(workspaceID uuid.UUID, items []item) []Record {
	var recs []Record
	for _, it := range items {
		if it.inBucket {
			recs = append(recs, Record{s3Key: objectKey(workspaceID, it.fileID)})
		}
	}
	return recs
}

// deadlineGuardMark is in the error of the deadline guard, the statement
// a stage's batch starts with when its context has a deadline
// (stageBatch.addDeadlineGuard): it fails once that deadline has passed on
// the server's clock, so that the batch's implicit transaction stores
// nothing. A batch written into the socket of a frozen Postgres (SIGSTOP,
// a stalled host) runs when the server resumes, long after its request
// was answered 503: without the guard it would then commit, and a client
// retrying the 503 would stage the files twice. (A freeze in the instant
// between the server's commit and its answer still leaves the outcome
// unknown; nothing can close that.) The CASE is volatile, so the cast is
// evaluated only at run time.
const deadlineGuardMark = "request deadline passed"

// objectConcurrency bounds the parallel writes (or copies) of one batch
// to the bucket.
const objectConcurrency = 4

func (s *Store) writeObjects(ctx context.Context, items []item, recs []Record) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(objectConcurrency)
	for i := range recs {
		if recs[i].s3Key == "" || items[i].inBucket {
			continue
		}
		it, key := items[i], recs[i].s3Key
		g.Go(func() error {
			if err := s.bucket.Put(gctx, key, it.Content, it.Mimetype); err != nil {
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
// CleanupBudget); the bucket's lifecycle rule removes what it misses.
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

// CleanupBudget bounds the best-effort work done after a failure
// (discarding the objects written for rows that did not commit), so that
// it never outlives the caller's deadline by much: a Lambda keeps a few
// seconds of margin for it.
const CleanupBudget = 2 * time.Second

// commitOutcomeUnknown reports whether a failed COMMIT may nevertheless
// have committed: the connection broke or the deadline passed after the
// COMMIT was sent. Only when the server said no, or the COMMIT never left,
// is it certain that nothing was stored, and objects written for the rows
// may be discarded; otherwise they must stay (the lifecycle rule removes
// them if the rows indeed did not commit).
func commitOutcomeUnknown(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return false
	}
	return true
}

func validate(items []item, fileCap int64) error {
	if len(items) > MaxBatch {
		return ErrTooManyItems
	}
	for i, it := range items {
		var err error
		switch {
		case it.inBucket && it.Content != nil:
			err = errors.New("both content and an object in the bucket")
		case it.inBucket && (it.fileID == uuid.Nil || len(it.sha256) != sha256.Size):
			err = errors.New("object in the bucket without its file ID or SHA-256")
		default:
			err = validateFile(it.length(), it.Filename, fileCap)
		}
		if err != nil {
			return &ItemError{Index: i, Err: err}
		}
	}
	return nil
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
