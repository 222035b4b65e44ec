package pendinguploads

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// NotReceivedError is Commit's refusal of an upload it cannot commit
// because the bucket does not hold it as declared: unknown or expired,
// no object in the bucket, an object of another size or digest than
// declared, or claimed by a concurrent commit that then rolled back.
// Sending the bytes again is the remedy. Nothing is stored.
type NotReceivedError struct {
	UploadID uuid.UUID
	Reason   string
}

func (e *NotReceivedError) Error() string {
	return fmt.Sprintf("upload %s not received: %s", e.UploadID, e.Reason)
}

// CommittedError is Commit's refusal of a commit that names an upload a
// commit took already beside one that none did (a commit of only taken
// uploads is a retry, answered with their files): the upload is a file
// now, and sending its bytes again would not change the answer; commit
// the others without it. It matches ErrUploadCommitted. Nothing is
// stored.
type CommittedError struct {
	UploadID uuid.UUID
	Reason   string
}

func (e *CommittedError) Error() string {
	return fmt.Sprintf("upload %s already committed: %s", e.UploadID, e.Reason)
}

// Is makes a *CommittedError match ErrUploadCommitted.
func (e *CommittedError) Is(target error) bool { return target == ErrUploadCommitted }

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
// whole, naming the first committed one (*CommittedError). Other
// refusals are *NotReceivedError; ErrNoBucket without a bucket.
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
	a, err := s.access(lctx, id, workspaceID)
	if err != nil {
		return nil, false, err
	}
	uploads, err := s.lookupPresigned(lctx, a, uploadIDs)
	if err != nil {
		return nil, false, err
	}
	if recs, ok, err := s.committedBefore(lctx, a, workspaceID, uploadIDs, uploads); ok || err != nil {
		return recs, ok, err
	}
	var size int64
	for _, id := range uploadIDs {
		u, ok := uploads[id]
		if !ok {
			return nil, false, &NotReceivedError{id, "unknown or expired"}
		}
		if u.committed() {
			return nil, false, &CommittedError{id, "beside new uploads"}
		}
		size += u.SizeBytes
	}
	ctx, cancelCopy := s.commitContext(ctx, start, size)
	defer cancelCopy()
	recs, err = s.copyAndMeasure(ctx, workspaceID, uploadIDs, uploads)
	if err == nil {
		err = s.unknownWorkspace(ctx, a, s.claimAndInsert(ctx, a, workspaceID, uploadIDs, recs))
	}
	nr, _ := errors.AsType[*NotReceivedError](err)
	if errors.Is(err, errClaimLost) || nr != nil {
		// A concurrent commit of the same uploads may have taken them (or
		// their staging objects) first: then this is its retry.
		return s.afterLostClaim(ctx, a, workspaceID, uploadIDs, nr)
	}
	if err != nil {
		return nil, false, err // the staging objects stay, for a retry
	}
	s.deleteStaging(ctx, workspaceID, uploadIDs, uploads)
	return recs, false, nil
}

// CopyRate is the slowest pace, in bytes a second, at which a commit
// counts on the bucket to assemble a multipart upload and copy the
// object. S3 copies inside a region far faster, but it says that a
// CompleteMultipartUpload "could take several minutes to finalize"
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CompleteMultipartUpload.html),
// and a loaded S3-compatible store is slower still (moto on a busy
// machine took over 10 s for 100 MiB, and under a load of 10 copied
// 48 MiB at under 12 MiB/s). At 4 MiB/s the largest file (100 MiB) adds
// 25 s to the default 10 s: on Lambda the invocation's own deadline caps
// it first (the upload function's 25 s, less lambdafn.Margin); only the
// dev server and slow S3-compatible stores see the whole of it.
const CopyRate = 4 << 20

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

// lookupPresigned returns the unexpired presigned uploads of a's
// workspace among ids, committed ones included (with their FileID), in
// one round trip with a's check. Missing ones are absent from the map.
func (s *Store) lookupPresigned(ctx context.Context, a *access, ids []uuid.UUID) (map[uuid.UUID]presignedUpload, error) {
	var b pgx.Batch
	out := make(map[uuid.UUID]presignedUpload, len(ids))
	b.Queue(`
		SELECT upload_id, workspace_id, filename, mimetype, size_bytes, sha256, coalesce(file_id, '00000000-0000-0000-0000-000000000000'),
		       coalesce(part_bytes, 0), coalesce(s3_upload_id, ''), part_sha256
		FROM presigned_uploads
		WHERE upload_id = ANY(@upload_ids::uuid[]) AND workspace_id = @workspace AND expires_at > now() AND `+a.callerMayAct,
		pgx.StrictNamedArgs{"upload_ids": uuidArray(ids)},
	).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var u presignedUpload
			var partSums []byte
			if err := rows.Scan(&u.UploadID, &u.WorkspaceID, &u.Filename, &u.Mimetype, &u.SizeBytes, &u.SHA256, &u.FileID,
				&u.PartBytes, &u.S3UploadID, &partSums); err != nil {
				return err
			}
			for sum := range slices.Chunk(partSums, sha256.Size) {
				u.PartSHA256 = append(u.PartSHA256, sum)
			}
			out[u.UploadID] = u
		}
		return rows.Err()
	})
	if err := a.send(ctx, "lookup presigned", &b); err != nil {
		return nil, err
	}
	return out, nil
}

// The presigned uploads' rows (presigned_uploads): what a presign
// declared, until a commit claims each (file_id names the file it became)
// or it expires and the sweep deletes it (sweepPresigned).

// presignedUpload is a presigned upload (a presigned_uploads row): what a
// client was allowed to PUT.
type presignedUpload struct {
	UploadID    uuid.UUID
	WorkspaceID uuid.UUID
	Filename    string
	Mimetype    string
	SizeBytes   int64
	SHA256      []byte // declared; nil when not
	// FileID is the file a commit made of it; uuid.Nil while uncommitted.
	FileID uuid.UUID
	// PartBytes is the part size of a multipart upload; 0 for one PUT.
	PartBytes int64
	// S3UploadID is the bucket's id of a multipart upload, once started.
	S3UploadID string
	// PartSHA256 is each part's declared SHA-256; nil when not declared.
	PartSHA256 [][]byte
}

func (p presignedUpload) committed() bool { return p.FileID != uuid.Nil }
func (p presignedUpload) multipart() bool { return p.PartBytes > 0 }

// partCount is how many parts of PartBytes the file takes.
func (p presignedUpload) partCount() int {
	return int((p.SizeBytes + p.PartBytes - 1) / p.PartBytes)
}

// partSize is the size of part n (from 1): PartBytes, the last shorter.
func (p presignedUpload) partSize(n int) int64 {
	return min(p.PartBytes, p.SizeBytes-int64(n-1)*p.PartBytes)
}

// contentType is what the object is stored as.
func (p presignedUpload) contentType() string {
	if p.Mimetype == "" {
		return octetStream
	}
	return p.Mimetype
}

// stagingKey is where the upload's client puts the bytes, before a
// commit places them under objects/ (objectKey). The bucket's lifecycle
// rule removes staging objects that are never committed.
func (p presignedUpload) stagingKey() string {
	return fmt.Sprintf("staging/%s/%s", p.WorkspaceID, p.UploadID)
}

// committedBefore returns the files a commit of every one of ids stored
// before, and ok; ok is false unless every upload was committed and its
// file is still there.
func (s *Store) committedBefore(ctx context.Context, a *access, workspaceID uuid.UUID, ids []uuid.UUID, uploads map[uuid.UUID]presignedUpload) ([]Record, bool, error) {
	fileIDs := make([]uuid.UUID, len(ids))
	for i, id := range ids {
		u, ok := uploads[id]
		if !ok || !u.committed() {
			return nil, false, nil
		}
		fileIDs[i] = u.FileID
	}
	byID, err := s.committedFiles(ctx, a, workspaceID, fileIDs)
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

// committedFiles returns the rows of workspaceID's files among fileIDs
// (without content), whatever their state, acting for a's caller; missing
// ones are absent. A retried commit answers with them.
func (s *Store) committedFiles(ctx context.Context, a *access, workspaceID uuid.UUID, fileIDs []uuid.UUID) (map[uuid.UUID]Record, error) {
	var b pgx.Batch
	out := make(map[uuid.UUID]Record, len(fileIDs))
	b.Queue(`
		SELECT file_id, workspace_id, filename, mimetype, size_bytes, sha256, coalesce(s3_key, '')
		FROM pending_uploads
		WHERE file_id = ANY(@file_ids::uuid[]) AND workspace_id = @workspace AND `+a.callerMayAct+`
		UNION ALL -- the files of a scanned deployment, waiting or decided (scan.go); a delivered one is in both
		SELECT file_id, workspace_id, filename, mimetype, size_bytes, sha256, s3_key
		FROM scanned_uploads s
		WHERE file_id = ANY(@file_ids::uuid[]) AND workspace_id = @workspace AND `+a.callerMayAct+`
		  AND NOT EXISTS (SELECT 1 FROM pending_uploads p WHERE p.file_id = s.file_id AND p.workspace_id = @workspace)`,
		pgx.StrictNamedArgs{"file_ids": uuidArray(fileIDs)},
	).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var r Record
			if err := rows.Scan(&r.FileID, &r.WorkspaceID, &r.Filename, &r.Mimetype, &r.SizeBytes, &r.SHA256, &r.s3Key); err != nil {
				return err
			}
			out[r.FileID] = r
		}
		return rows.Err()
	})
	if err := a.send(ctx, "committed files", &b); err != nil {
		return nil, err
	}
	return out, nil
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
		g.Go(func() error {
			if u.multipart() {
				if err := s.completeMultipart(gctx, u); err != nil {
					return err
				}
			}
			dst := objectKey(workspaceID, fid)
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

// completeMultipart assembles p's multipart upload from the parts the bucket
// holds, which must be every part, each of its size: else a
// *NotReceivedError naming what is missing. An upload the bucket no
// longer has was completed before (a commit whose answer was lost), or
// aborted: copyAndMeasure then finds its object, or not.
func (s *Store) completeMultipart(ctx context.Context, p presignedUpload) error {
	parts, err := s.bucket.ListParts(ctx, p.stagingKey(), p.S3UploadID)
	if errors.Is(err, ErrBlobNotFound) {
		return nil
	}
	if err != nil {
		return wrap("commit: list parts", err)
	}
	want := p.partCount()
	byNumber := make(map[int32]Part, len(parts))
	for _, part := range parts {
		byNumber[part.Number] = part
	}
	done := make([]Part, 0, want)
	for n := 1; n <= want; n++ {
		part, ok := byNumber[int32(n)]
		switch {
		case !ok:
			return &NotReceivedError{p.UploadID, fmt.Sprintf("part %d of %d missing", n, want)}
		case part.Size != p.partSize(n):
			return &NotReceivedError{p.UploadID, fmt.Sprintf("part %d holds %d bytes, %d declared", n, part.Size, p.partSize(n))}
		}
		done = append(done, part)
	}
	if len(parts) != want {
		return &NotReceivedError{p.UploadID, fmt.Sprintf("%d parts, %d declared", len(parts), want)}
	}
	if err := s.bucket.CompleteMultipart(ctx, p.stagingKey(), p.S3UploadID, done); err != nil && !errors.Is(err, ErrBlobNotFound) {
		return wrap("commit: complete multipart", err)
	}
	return nil
}

// claimAndInsert stores recs, copied from the presigned uploads ids
// (recs[i] from ids[i]), in one round trip, one implicit transaction,
// acting for a's caller: it claims every upload (each then names the file it
// became) and inserts the rows and their activity rows, or stores nothing
// (errClaimLost) when any upload expired or another commit took it first.
// The uploads are locked in upload_id order, so two commits sharing
// uploads wait for each other instead of deadlocking.
func (s *Store) claimAndInsert(ctx context.Context, a *access, workspaceID uuid.UUID, ids []uuid.UUID, recs []Record) error {
	fileIDs := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		fileIDs[i] = r.FileID
	}
	q := s.quotaFor(int64(len(recs)), total(recs))
	return s.finish(ctx, a, q, recs, func(b *pgx.Batch) *inserted {
		return s.queueClaimAndInsert(ctx, b, a, ids, fileIDs, recs, q)
	})
}

// queueClaimAndInsert queues on b claimAndInsert's statements.
func (s *Store) queueClaimAndInsert(ctx context.Context, b *pgx.Batch, a *access, ids, fileIDs []uuid.UUID, recs []Record, q *quota) *inserted {
	q.queue(b, a, true)
	// The claim and the rows hold together: each statement takes its
	// part only when the uploads are all there, the deadline has not
	// passed, the caller is allowed and the files fit the quota; the
	// rows, also only beside their claims.
	b.Queue(`
		WITH locked AS MATERIALIZED (
		    SELECT upload_id FROM presigned_uploads
		    WHERE upload_id = ANY(@upload_ids::uuid[]) AND expires_at > now() AND file_id IS NULL
		      AND workspace_id = @workspace AND `+a.callerMayAct+`
		    ORDER BY upload_id FOR UPDATE
		)
		UPDATE presigned_uploads p SET file_id = c.file_id
		FROM unnest(@upload_ids::uuid[], @file_ids::uuid[]) AS c(upload_id, file_id)
		WHERE p.upload_id = c.upload_id AND (SELECT count(*) FROM locked) = cardinality(@upload_ids::uuid[])
		  AND (@deadline::timestamptz IS NULL OR now() <= @deadline)
		  AND p.workspace_id = @workspace AND `+a.callerMayAct+` AND `+knownWorkspace+` AND `+quotaFits,
		q.args(pgx.StrictNamedArgs{"upload_ids": uuidArray(ids), "file_ids": uuidArray(fileIDs), "deadline": deadlineOf(ctx),
			"refuse_unknown": s.RefuseUnknownWorkspaces}))
	return s.queueFiles(ctx, b, a.callerMayAct, recs, make([][]byte, len(recs)), uuidArray(ids), q)
}

// claimedAll is the condition, named where the INSERT of files uses it
// (queueInsert), that every upload of @upload_ids is claimed, in this
// transaction, for its file of @file_ids, in @workspace: Commit's; it
// holds for Stage's, which names none.
const claimedAll = `(SELECT count(*) FROM presigned_uploads p JOIN unnest(@upload_ids::uuid[], @file_ids::uuid[]) AS c(upload_id, file_id)
		         ON p.upload_id = c.upload_id AND p.file_id = c.file_id AND p.workspace_id = @workspace) = cardinality(@upload_ids::uuid[])`

// afterLostClaim answers a commit whose claim was lost, or whose objects
// were not there (nr): when a concurrent commit of the same uploads took
// them, with what it stored (replayed); otherwise with nr, or the first
// upload taken (firstTaken).
func (s *Store) afterLostClaim(ctx context.Context, a *access, workspaceID uuid.UUID, uploadIDs []uuid.UUID,
	nr *NotReceivedError) ([]Record, bool, error) {
	now, err := s.lookupPresigned(ctx, a, uploadIDs)
	if err != nil {
		return nil, false, err
	}
	if recs, ok, err := s.committedBefore(ctx, a, workspaceID, uploadIDs, now); ok || err != nil {
		return recs, ok, err
	}
	if nr != nil {
		return nil, false, nr
	}
	return nil, false, firstTaken(uploadIDs, now)
}

// firstTaken names the first upload a lost claim could not take: gone
// (expired: *NotReceivedError) or committed by another commit
// (*CommittedError).
func firstTaken(ids []uuid.UUID, uploads map[uuid.UUID]presignedUpload) error {
	for _, id := range ids {
		u, ok := uploads[id]
		if !ok {
			return &NotReceivedError{id, "expired before the commit"}
		}
		if u.committed() {
			return &CommittedError{id, "taken by a concurrent commit"}
		}
	}
	return &NotReceivedError{ids[0], "taken by a concurrent commit, since rolled back"}
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
