package pendinguploads

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// NotReceivedError is Commit's refusal of an upload it cannot commit:
// unknown or expired, already committed beside new uploads, taken by a
// concurrent commit, no object in the bucket, or an object of another
// size than declared. Nothing is stored.
type NotReceivedError struct {
	UploadID uuid.UUID
	Reason   string
}

func (e *NotReceivedError) Error() string {
	return fmt.Sprintf("upload %s not received: %s", e.UploadID, e.Reason)
}

// Commit stages, for workspaceID and acting for id, the files whose
// bytes clients put into the bucket after Presign: every upload or none.
// Each staging object is copied to a key only the server writes and
// measured there: its size must be the declared one, and its SHA-256 is
// the digest the workspace will verify, whatever the client does with
// its PUT URL meanwhile. Two round trips: id's check with the presigned
// uploads' look-up, before anything touches the bucket; then, in one
// implicit transaction, the claim of the presigned uploads, the rows and
// their activity rows. The staging objects are then deleted.
//
// A commit whose every upload this workspace committed before (a client
// retrying a commit whose answer it lost, or the loser of a race with its
// own twin) returns the files that commit stored, with replayed true, and
// stores nothing. A mix of new and committed uploads is refused as a
// whole, naming the first committed one. Refusals are *NotReceivedError;
// ErrNoBucket without a bucket.
//
// Commit sets its own deadline, as only it learns how many bytes it
// copies: ctx carries the caller's outer bound alone (on Lambda, the
// invocation's). From the call's start, the look-up gets RequestTimeout,
// the rest CommitTimeout of the uploads' bytes. A commit cut short (its
// deadline, the bucket failing) stores nothing and leaves its uploads
// committable: a multipart upload it completed stays completed, its
// object in place, and Resume plans no part to send.
func (s *Store) Commit(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, uploadIDs []uuid.UUID) (recs []Record, replayed bool, err error) {
	if s.bucket == nil {
		return nil, false, ErrNoBucket
	}
	if len(uploadIDs) > limits.MaxFiles {
		return nil, false, ErrTooManyItems
	}
	start := time.Now()
	lctx, cancel := s.commitContext(ctx, start, 0)
	defer cancel()
	caller, uploads, err := s.lookupPresigned(lctx, id, workspaceID, uploadIDs)
	if err != nil {
		return nil, false, err
	}
	if recs, ok, err := s.committedBefore(lctx, caller, workspaceID, uploadIDs, uploads); ok || err != nil {
		return recs, ok, err
	}
	var size int64
	for _, id := range uploadIDs {
		u, ok := uploads[id]
		if !ok {
			return nil, false, &NotReceivedError{id, "unknown or expired"}
		}
		if u.committed() {
			return nil, false, &NotReceivedError{id, "already committed, beside new uploads"}
		}
		size += u.SizeBytes
	}
	ctx, cancelCopy := s.commitContext(ctx, start, size)
	defer cancelCopy()
	recs, err = s.copyAndMeasure(ctx, workspaceID, uploadIDs, uploads)
	if err == nil {
		err = s.claimAndInsert(ctx, caller, workspaceID, uploadIDs, recs)
	}
	nr, _ := errors.AsType[*NotReceivedError](err)
	if errors.Is(err, errClaimLost) || nr != nil {
		// A concurrent commit of the same uploads may have taken them (or
		// their staging objects) first: then this is its retry.
		return s.afterLostClaim(ctx, caller, workspaceID, uploadIDs, nr)
	}
	if err != nil {
		return nil, false, err // the staging objects stay, for a retry
	}
	s.notify(ctx, workspaceID, recs)
	s.deleteStaging(ctx, workspaceID, uploadIDs, uploads)
	return recs, false, nil
}

// CopyRate is the slowest pace, in bytes a second, at which a commit
// counts on the bucket to assemble a multipart upload and copy the
// object. S3 copies inside a region far faster, but it says that a
// CompleteMultipartUpload "could take several minutes to finalize"
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CompleteMultipartUpload.html),
// and a loaded S3-compatible store is slower still (moto on a busy
// machine took over 10 s for 100 MiB). At 8 MiB/s the largest file
// (100 MiB) adds 12.5 s to the default 10 s: on Lambda the invocation's
// own deadline caps it first (the upload function's 25 s, less
// lambdafn.Margin).
const CopyRate = 8 << 20

// CommitTimeout is the deadline of a commit of n bytes, from its start:
// base (REQUEST_TIMEOUT: its round trips to Postgres, S3's fixed costs)
// and n bytes at CopyRate.
func CommitTimeout(base time.Duration, n int64) time.Duration {
	return base + time.Duration(float64(n)/CopyRate*float64(time.Second))
}

// commitContext is ctx bounded by the deadline of a commit of n bytes
// started at start (CommitTimeout); without RequestTimeout, by ctx's
// alone.
func (s *Store) commitContext(ctx context.Context, start time.Time, n int64) (context.Context, context.CancelFunc) {
	if s.RequestTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, start.Add(CommitTimeout(s.RequestTimeout, n)))
}

// afterLostClaim answers a commit whose claim was lost, or whose objects
// were not there (nr): when a concurrent commit of the same uploads took
// them, with what it stored (replayed); otherwise with nr, or the first
// upload taken.
func (s *Store) afterLostClaim(ctx context.Context, caller *auth.Identity, workspaceID uuid.UUID, uploadIDs []uuid.UUID,
	nr *NotReceivedError) ([]Record, bool, error) {
	_, now, err := s.lookupPresigned(ctx, caller, workspaceID, uploadIDs)
	if err != nil {
		return nil, false, err
	}
	if recs, ok, err := s.committedBefore(ctx, caller, workspaceID, uploadIDs, now); ok || err != nil {
		return recs, ok, err
	}
	if nr == nil {
		nr = firstTaken(uploadIDs, now)
	}
	return nil, false, nr
}

// deleteStaging deletes the staging objects of a commit that committed:
// the objects under objects/ are the files now. The lifecycle rule
// removes any staging object this misses, a day later: the file is then
// twice in the bucket, so it is said.
func (s *Store) deleteStaging(ctx context.Context, workspaceID uuid.UUID, uploadIDs []uuid.UUID, uploads map[uuid.UUID]presignedUpload) {
	keys := make([]string, len(uploadIDs))
	for i, id := range uploadIDs {
		keys[i] = uploads[id].stagingKey()
	}
	if err := s.bucket.Delete(ctx, keys); err != nil {
		s.logger().Warn("staging copies not deleted after the commit; the bucket's lifecycle rule removes them within a day",
			"workspace_id", workspaceID, "keys", len(keys), "err", err)
	}
}

// claimAndInsert stores recs, copied from the presigned uploads ids
// (recs[i] from ids[i]), in one round trip, one implicit transaction,
// acting for caller: it claims every upload (each then names the file it
// became) and inserts the rows and their activity rows, or stores nothing
// (errClaimLost) when any upload expired or another commit took it first.
// The uploads are locked in upload_id order, so two commits sharing
// uploads wait for each other instead of deadlocking.
func (s *Store) claimAndInsert(ctx context.Context, caller *auth.Identity, workspaceID uuid.UUID, ids []uuid.UUID, recs []Record) error {
	fileIDs := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		fileIDs[i] = r.FileID
	}
	rt, err := s.roundTrip(ctx, caller, workspaceID)
	if err != nil {
		s.discard(ctx, recs)
		return err
	}
	q := s.quotaFor(int64(len(recs)), total(recs))
	q.queue(rt, true)
	// The claim and the rows hold together: each statement takes its
	// part only when the uploads are all there, the deadline has not
	// passed, the caller is allowed and the files fit the quota; the
	// rows, also only beside their claims.
	st := rt.statement()
	uploads, files, deadline := st.Arg(uuidArray(ids)), st.Arg(uuidArray(fileIDs)), st.Arg(deadlineOf(ctx))
	rt.queue(st, `
		WITH locked AS MATERIALIZED (
		    SELECT upload_id FROM presigned_uploads
		    WHERE upload_id = ANY(`+uploads+`::uuid[]) AND workspace_id = `+st.Workspace()+` AND expires_at > now() AND file_id IS NULL
		    ORDER BY upload_id FOR UPDATE
		)
		UPDATE presigned_uploads p SET file_id = c.file_id
		FROM unnest(`+uploads+`::uuid[], `+files+`::uuid[]) AS c(upload_id, file_id)
		WHERE `+allOf(`p.upload_id = c.upload_id AND (SELECT count(*) FROM locked) = cardinality(`+uploads+`::uuid[])`,
		`(`+deadline+`::timestamptz IS NULL OR now() <= `+deadline+`)`, callerMayAct, q.cond(st)))
	st = rt.statement()
	uploads, files = st.Arg(uuidArray(ids)), st.Arg(uuidArray(fileIDs))
	claimed := `(SELECT count(*) FROM presigned_uploads p JOIN unnest(` + uploads + `::uuid[], ` + files + `::uuid[]) AS c(upload_id, file_id)
		         ON p.upload_id = c.upload_id AND p.file_id = c.file_id AND p.workspace_id = ` + st.Workspace() + `) = cardinality(` + uploads + `::uuid[])`
	ins := queueInsert(ctx, rt, st, s.TTL, recs, make([][]byte, len(recs)), allOf(claimed, q.cond(st)))
	return s.finish(ctx, rt, ins, q, recs)
}

// deadlineOf is ctx's deadline, or nil.
func deadlineOf(ctx context.Context) *time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return &dl
	}
	return nil
}

// firstTaken names the first upload a lost claim could not take: gone
// (expired) or committed by another commit.
func firstTaken(ids []uuid.UUID, uploads map[uuid.UUID]presignedUpload) *NotReceivedError {
	for _, id := range ids {
		u, ok := uploads[id]
		if !ok {
			return &NotReceivedError{id, "expired before the commit"}
		}
		if u.committed() {
			return &NotReceivedError{id, "taken by a concurrent commit"}
		}
	}
	return &NotReceivedError{ids[0], "taken by a concurrent commit, since rolled back"}
}

// committedBefore returns the files a commit of every one of ids stored
// before, and ok; ok is false unless every upload was committed and its
// file is still there.
func (s *Store) committedBefore(ctx context.Context, caller *auth.Identity, workspaceID uuid.UUID, ids []uuid.UUID, uploads map[uuid.UUID]presignedUpload) ([]Record, bool, error) {
	fileIDs := make([]uuid.UUID, len(ids))
	for i, id := range ids {
		u, ok := uploads[id]
		if !ok || !u.committed() {
			return nil, false, nil
		}
		fileIDs[i] = u.FileID
	}
	byID, err := s.committedFiles(ctx, caller, workspaceID, fileIDs)
	if err != nil {
		return nil, false, err
	}
	recs := make([]Record, len(ids))
	for i, fid := range fileIDs {
		rec, ok := byID[fid]
		if !ok {
			return nil, false, nil // committed, then swept: not a retry any more
		}
		recs[i] = rec
	}
	return recs, true, nil
}

// copyConcurrency bounds the objects one commit copies and hashes at once.
const copyConcurrency = 4

// copyAndMeasure copies each staged object to objectKey(workspace, new file ID)
// and measures the copy, by the bucket's own checksum (no byte of the
// file passes through this process). The size must be the declared one,
// and so must the SHA-256 when the client declared it. It returns the
// records of the files, in ids' order. On failure the copies made so far
// are discarded; the staging objects stay for a retry.
func (s *Store) copyAndMeasure(ctx context.Context, workspaceID uuid.UUID, ids []uuid.UUID, uploads map[uuid.UUID]presignedUpload) ([]Record, error) {
	recs := make([]Record, len(ids))
	var mu sync.Mutex
	var placed []Record
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyConcurrency)
	for i, id := range ids {
		u, fid := uploads[id], uuid.New()
		dst := objectKey(workspaceID, fid)
		g.Go(func() error {
			if u.multipart() {
				if err := s.completeMultipart(gctx, u); err != nil {
					return err
				}
			}
			n, sum, err := s.bucket.CopyMeasured(gctx, u.stagingKey(), dst)
			if errors.Is(err, ErrBlobNotFound) {
				return &NotReceivedError{id, "no object"}
			}
			// A copy may exist even when the answer was an error.
			mu.Lock()
			placed = append(placed, Record{s3Key: dst})
			mu.Unlock()
			if err != nil {
				return wrap("commit: copy", err)
			}
			if n != u.SizeBytes {
				return &NotReceivedError{id, fmt.Sprintf("object holds %d bytes, %d declared", n, u.SizeBytes)}
			}
			if u.SHA256 != nil && !bytes.Equal(sum, u.SHA256) {
				return &NotReceivedError{id, "object's SHA-256 is not the declared one"}
			}
			recs[i] = Record{FileID: fid, WorkspaceID: workspaceID, Filename: u.Filename, Mimetype: u.Mimetype,
				SizeBytes: n, SHA256: sum, s3Key: dst}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.discard(ctx, placed)
		return nil, err
	}
	return recs, nil
}
