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
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// A presigned upload goes in three steps. Presign records what the client
// promises (name, type, size) and signs a PUT of exactly that many bytes
// to a staging key; the client puts the bytes into the bucket; Commit
// places each object under a key only the server writes, measures it, and
// stages its row. Nothing is visible to the workspace before the commit.

// Presign and commit windows.
const (
	// presignPutTTL is how long a presigned PUT URL lives.
	presignPutTTL = 15 * time.Minute
	// commitWindow is how long after a presign its upload may
	// still be committed: the PUT URL lives 15 minutes, and a slow client
	// gets time to finish the PUT and then commit.
	commitWindow = time.Hour
)

// octetStream is the Content-Type a PUT is signed for when the client
// declared none.
const octetStream = "application/octet-stream"

// Declared is a file a client means to put into the bucket.
type Declared struct {
	Filename string // already sanitized: 1..100 bytes
	Mimetype string // already made safe; may be empty
	Size     int64
	// SHA256, when the client declares it (32 bytes), is signed into the
	// PUT: the bucket refuses other bytes, and a commit refuses an object
	// whose checksum is another.
	SHA256 []byte
	// Multipart says the client can send the file in parts: a file above
	// the Store's MultipartThreshold then goes as an S3 multipart upload of
	// PartBytes parts.
	Multipart bool
	// PartSHA256, when the client declares it, is each part's SHA-256 in
	// order (as many as the file has parts of PartBytes): every part's URL
	// is bound to its checksum.
	PartSHA256 [][]byte
}

// PresignedPut is the signed PUT of one declared file, or its plan of
// parts.
type PresignedPut struct {
	UploadID  uuid.UUID
	URL       string            // "" for a multipart upload
	Headers   map[string]string // to send with the PUT, exactly
	ExpiresAt time.Time         // of the URL(s)
	// Multipart is the plan of a file that goes in parts; nil for one PUT.
	Multipart *Multipart
}

// Multipart is the plan of a multipart upload: PartCount parts of
// PartBytes (the last one shorter), the parts the bucket already holds,
// and a signed PUT of each other one.
type Multipart struct {
	PartBytes int64
	PartCount int
	Received  []Part
	Parts     []PartPut
}

// PartPut is the signed PUT of one part.
type PartPut struct {
	Number  int32
	Size    int64
	URL     string
	Headers map[string]string // to send with the PUT, exactly
}

// Presign records files as presigned uploads of workspaceID, acting for
// id, in one round trip with id's check, and signs a PUT of each, in input order. It
// validates every file first, as Stage does (an *ItemError;
// ErrTooManyItems), and returns ErrNoBucket when the Store has no bucket.
func (s *Store) Presign(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, files []Declared) ([]PresignedPut, error) {
	if s.bucket == nil {
		return nil, ErrNoBucket
	}
	if len(files) > limits.MaxFiles {
		return nil, ErrTooManyItems
	}
	promises := make([]promise, len(files))
	for i, f := range files {
		p := promise{UploadID: uuid.New(), WorkspaceID: workspaceID,
			Filename: f.Filename, Mimetype: f.Mimetype, SizeBytes: f.Size, SHA256: f.SHA256}
		err := validateFile(f.Size, f.Filename, s.FileCap())
		if err == nil && f.SHA256 != nil && len(f.SHA256) != sha256.Size {
			err = fmt.Errorf("a SHA-256 of %d bytes", len(f.SHA256))
		}
		if err == nil && f.Multipart && f.Size > s.MultipartThreshold {
			p.PartBytes = s.PartBytes
			if f.PartSHA256 != nil && len(f.PartSHA256) != p.partCount() {
				err = fmt.Errorf("%w: %d declared, the file has %d parts of %d bytes", ErrBadParts, len(f.PartSHA256), p.partCount(), p.PartBytes)
			}
			for _, sum := range f.PartSHA256 {
				if err == nil && len(sum) != sha256.Size {
					err = fmt.Errorf("%w: a SHA-256 of %d bytes", ErrBadParts, len(sum))
				}
			}
			p.PartSHA256 = f.PartSHA256
		} else if err == nil && f.PartSHA256 != nil {
			err = fmt.Errorf("%w: a file sent in one PUT has no parts", ErrBadParts)
		}
		if err != nil {
			return nil, &ItemError{Index: i, Err: err}
		}
		promises[i] = p
	}
	if err := s.recordPromises(ctx, id, workspaceID, promises); err != nil {
		return nil, err
	}
	if err := s.startMultipart(ctx, promises); err != nil {
		return nil, err
	}
	expires := time.Now().Add(presignPutTTL).UTC().Truncate(time.Second)
	out := make([]PresignedPut, len(promises))
	for i, p := range promises {
		out[i] = PresignedPut{UploadID: p.UploadID, ExpiresAt: expires}
		if p.multipart() {
			plan, err := s.plan(ctx, p, nil)
			if err != nil {
				return nil, err
			}
			out[i].Multipart = plan
			continue
		}
		url, headers, err := s.bucket.PresignPut(ctx, p.stagingKey(), p.SizeBytes, p.contentType(), p.SHA256, presignPutTTL)
		if err != nil {
			return nil, wrap("presign put", err)
		}
		out[i].URL, out[i].Headers = url, headers
	}
	return out, nil
}

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
// its PUT URL meanwhile. Two round trips: id's check with the promises'
// look-up, before anything touches the bucket; then, in one implicit
// transaction, the claim of the presigned uploads, the rows and their
// activity rows. The staging objects are then deleted.
//
// A commit whose every upload this workspace committed before (a client
// retrying a commit whose answer it lost, or the loser of a race with its
// own twin) returns the files that commit stored, with replayed true, and
// stores nothing. A mix of new and committed uploads is refused as a
// whole, naming the first committed one. Refusals are *NotReceivedError;
// ErrNoBucket without a bucket.
func (s *Store) Commit(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, uploadIDs []uuid.UUID) (recs []Record, replayed bool, err error) {
	if s.bucket == nil {
		return nil, false, ErrNoBucket
	}
	if len(uploadIDs) > limits.MaxFiles {
		return nil, false, ErrTooManyItems
	}
	check, err := s.check(ctx, id, workspaceID)
	if err != nil {
		return nil, false, err
	}
	promised, err := s.lookupPromises(ctx, check, workspaceID, uploadIDs)
	if err != nil {
		return nil, false, err
	}
	if recs, ok, err := s.replay(ctx, workspaceID, uploadIDs, promised); ok || err != nil {
		return recs, ok, err
	}
	for _, id := range uploadIDs {
		p, ok := promised[id]
		if !ok {
			return nil, false, &NotReceivedError{id, "unknown or expired"}
		}
		if p.committed() {
			return nil, false, &NotReceivedError{id, "already committed, beside new uploads"}
		}
	}
	recs, err = s.place(ctx, workspaceID, uploadIDs, promised)
	if err == nil {
		err = s.claimAndInsert(ctx, check, workspaceID, uploadIDs, recs)
	}
	nr, _ := errors.AsType[*NotReceivedError](err)
	if errors.Is(err, errClaimLost) || nr != nil {
		// A concurrent commit of the same uploads may have taken them (or
		// their staging objects) first: then this is its retry.
		now, lerr := s.lookupPromises(ctx, check, workspaceID, uploadIDs)
		if lerr != nil {
			return nil, false, lerr
		}
		if recs, ok, err := s.replay(ctx, workspaceID, uploadIDs, now); ok || err != nil {
			return recs, ok, err
		}
		if nr == nil {
			nr = firstTaken(uploadIDs, now)
		}
		return nil, false, nr
	}
	if err != nil {
		return nil, false, err // the staging objects stay, for a retry
	}
	s.notify(ctx, workspaceID, recs)
	// Committed: the objects under objects/ are the files now. The
	// lifecycle rule removes any staging object this misses, a day
	// later: the file is then twice in the bucket, so it is said.
	keys := make([]string, len(uploadIDs))
	for i, id := range uploadIDs {
		keys[i] = promised[id].stagingKey()
	}
	if err := s.bucket.Delete(ctx, keys); err != nil {
		s.logger().Warn("staging copies not deleted after the commit; the bucket's lifecycle rule removes them within a day",
			"workspace_id", workspaceID, "keys", len(keys), "err", err)
	}
	return recs, false, nil
}

// claimAndInsert stores recs, placed from the presigned uploads ids
// (recs[i] from ids[i]), in one round trip, one implicit transaction: it
// claims every upload (each then names the file it became) and inserts
// the rows and their activity rows, or stores nothing (errClaimLost) when
// any upload expired or another commit took it first. The uploads are
// locked in upload_id order, so two commits sharing uploads wait for each
// other instead of deadlocking.
func (s *Store) claimAndInsert(ctx context.Context, check *auth.Check, workspaceID uuid.UUID, ids []uuid.UUID, recs []Record) error {
	fileIDs := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		fileIDs[i] = r.FileID
	}
	q := s.quotaFor(int64(len(recs)), total(recs))
	b := &pgx.Batch{}
	check.Queue(b)
	q.queue(b, check, workspaceID, true)
	// The claim and the rows hold together: each statement takes its
	// part only when the uploads are all there, the deadline has not
	// passed, the identity is allowed and the files fit the quota; the
	// rows, also only beside their claims.
	claimQuota, claimArgs := q.cond(3, 6)
	b.Queue(`
		WITH locked AS MATERIALIZED (
		    SELECT upload_id FROM presigned_uploads
		    WHERE upload_id = ANY($1::uuid[]) AND workspace_id = $3 AND expires_at > now() AND file_id IS NULL
		    ORDER BY upload_id FOR UPDATE
		)
		UPDATE presigned_uploads p SET file_id = c.file_id
		FROM unnest($1::uuid[], $2::uuid[]) AS c(upload_id, file_id)
		WHERE `+and(`p.upload_id = c.upload_id AND (SELECT count(*) FROM locked) = cardinality($1::uuid[])
		  AND ($5::timestamptz IS NULL OR now() <= $5) AND `+check.Guard(4, 3), claimQuota),
		append([]any{uuidArray(ids), uuidArray(fileIDs), workspaceID, check.Arg(), deadlineOf(ctx)}, claimArgs...)...)
	insQuota, insArgs := q.cond(1, 7)
	ins := queueInsert(ctx, b, check, workspaceID, s.TTL, recs, make([][]byte, len(recs)), and(`
		    (SELECT count(*) FROM presigned_uploads p JOIN unnest($5::uuid[], $6::uuid[]) AS c(upload_id, file_id)
		         ON p.upload_id = c.upload_id AND p.file_id = c.file_id AND p.workspace_id = $1) = cardinality($5::uuid[])`, insQuota),
		append([]any{uuidArray(ids), uuidArray(fileIDs)}, insArgs...)...)
	return s.finish(ctx, b, check, ins, q, recs)
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
func firstTaken(ids []uuid.UUID, promised map[uuid.UUID]promise) *NotReceivedError {
	for _, id := range ids {
		p, ok := promised[id]
		if !ok {
			return &NotReceivedError{id, "expired before the commit"}
		}
		if p.committed() {
			return &NotReceivedError{id, "taken by a concurrent commit"}
		}
	}
	return &NotReceivedError{ids[0], "taken by a concurrent commit, since rolled back"}
}

// replay returns the files a commit of every one of ids stored before,
// and ok; ok is false unless every upload was committed and its file is
// still there.
func (s *Store) replay(ctx context.Context, workspaceID uuid.UUID, ids []uuid.UUID, promised map[uuid.UUID]promise) ([]Record, bool, error) {
	fileIDs := make([]uuid.UUID, len(ids))
	for i, id := range ids {
		p, ok := promised[id]
		if !ok || !p.committed() {
			return nil, false, nil
		}
		fileIDs[i] = p.FileID
	}
	byID, err := s.committedFiles(ctx, workspaceID, fileIDs)
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

// placeConcurrency bounds the objects one commit copies and hashes at once.
const placeConcurrency = 4

// place copies each staged object to objectKey(workspace, new file ID)
// and measures the copy, by the bucket's own checksum (no byte of the
// file passes through this process). The size must be the declared one,
// and so must the SHA-256 when the client declared it. It returns the
// records of the files, in ids' order. On failure the copies made so far
// are discarded; the staging objects stay for a retry.
func (s *Store) place(ctx context.Context, workspaceID uuid.UUID, ids []uuid.UUID, promised map[uuid.UUID]promise) ([]Record, error) {
	recs := make([]Record, len(ids))
	var mu sync.Mutex
	var placed []Record
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(placeConcurrency)
	for i, id := range ids {
		p, fid := promised[id], uuid.New()
		dst := objectKey(workspaceID, fid)
		g.Go(func() error {
			if p.multipart() {
				if err := s.complete(gctx, p); err != nil {
					return err
				}
			}
			n, sum, err := s.bucket.CopyMeasured(gctx, p.stagingKey(), dst)
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
			if n != p.SizeBytes {
				return &NotReceivedError{id, fmt.Sprintf("object holds %d bytes, %d declared", n, p.SizeBytes)}
			}
			if p.SHA256 != nil && !bytes.Equal(sum, p.SHA256) {
				return &NotReceivedError{id, "object's SHA-256 is not the declared one"}
			}
			recs[i] = Record{FileID: fid, WorkspaceID: workspaceID, Filename: p.Filename, Mimetype: p.Mimetype,
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

// promise is a presigned upload: what a client was allowed to PUT.
type promise struct {
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

func (p promise) committed() bool { return p.FileID != uuid.Nil }

func (p promise) multipart() bool { return p.PartBytes > 0 }

// partCount is how many parts of PartBytes the file takes.
func (p promise) partCount() int {
	return int((p.SizeBytes + p.PartBytes - 1) / p.PartBytes)
}

// partSize is the size of part n (from 1): PartBytes, the last shorter.
func (p promise) partSize(n int) int64 {
	return min(p.PartBytes, p.SizeBytes-int64(n-1)*p.PartBytes)
}

// contentType is what the object is stored as.
func (p promise) contentType() string {
	if p.Mimetype == "" {
		return octetStream
	}
	return p.Mimetype
}

func (p promise) stagingKey() string { return stagingKey(p.WorkspaceID, p.UploadID) }

// recordPromises remembers what a presign promised, in one round trip
// with id's check, committable until now + commitWindow.
func (s *Store) recordPromises(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, items []promise) error {
	if len(items) == 0 {
		return nil
	}
	if len(items) > limits.MaxFiles {
		return ErrTooManyItems
	}
	ids := make([]uuid.UUID, len(items))
	wss := make([]uuid.UUID, len(items))
	names := make([]string, len(items))
	types := make([]string, len(items))
	sizes := make([]int64, len(items))
	sums := make([][]byte, len(items))
	partBytes := make([]*int64, len(items))
	partSums := make([][]byte, len(items))
	for i, it := range items {
		ids[i], wss[i], names[i], types[i], sizes[i], sums[i] = it.UploadID, it.WorkspaceID, it.Filename, it.Mimetype, it.SizeBytes, it.SHA256
		if it.multipart() {
			partBytes[i] = &items[i].PartBytes
			if it.PartSHA256 != nil {
				partSums[i] = bytes.Join(it.PartSHA256, nil)
			}
		}
	}
	check, err := s.check(ctx, id, workspaceID)
	if err != nil {
		return err
	}
	var adding int64
	for _, it := range items {
		adding += it.SizeBytes
	}
	// The quota, early: without the workspace's lock (the commit checks
	// it exactly).
	q := s.quotaFor(int64(len(items)), adding)
	b := &pgx.Batch{}
	check.Queue(b)
	q.queue(b, check, workspaceID, false)
	quotaCond, quotaArgs := q.cond(8, 12)
	var inserted int64
	b.Queue(`
		INSERT INTO presigned_uploads (upload_id, workspace_id, filename, mimetype, size_bytes, sha256, expires_at, part_bytes, part_sha256)
		SELECT u.id, u.ws, u.name, u.type, u.size, u.sha256, now() + $6::bigint * interval '1 microsecond', u.part_bytes, u.part_sha256
		FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::bigint[], $9::bytea[], $10::bigint[], $11::bytea[])
		     AS u(id, ws, name, type, size, sha256, part_bytes, part_sha256)
		WHERE `+and(check.Guard(7, 8), quotaCond),
		append([]any{uuidArray(ids), uuidArray(wss), names, types, sizes, commitWindow.Microseconds(), check.Arg(), workspaceID, sums, partBytes, partSums}, quotaArgs...)...).Exec(func(tag pgconn.CommandTag) error {
		inserted = tag.RowsAffected()
		return nil
	})
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return s.batchError("record presigned", err)
	}
	if err := check.Settle(); err != nil {
		return tokenError(err)
	}
	if inserted != int64(len(items)) {
		if err := q.refusal(); err != nil {
			return err
		}
		return fmt.Errorf("record presigned: inserted %d rows, want %d", inserted, len(items))
	}
	return nil
}

// lookupPromises returns the unexpired presigned uploads of workspaceID
// among ids, committed ones included (with their FileID), in one round
// trip with check. Missing ones are absent from the map.
func (s *Store) lookupPromises(ctx context.Context, check *auth.Check, workspaceID uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]promise, error) {
	b := &pgx.Batch{}
	check.Queue(b)
	out := make(map[uuid.UUID]promise, len(ids))
	b.Queue(`
		SELECT upload_id, workspace_id, filename, mimetype, size_bytes, sha256, coalesce(file_id, '00000000-0000-0000-0000-000000000000'),
		       coalesce(part_bytes, 0), coalesce(s3_upload_id, ''), part_sha256
		FROM presigned_uploads
		WHERE upload_id = ANY($1) AND workspace_id = $2 AND expires_at > now() AND `+check.Guard(3, 2),
		uuidArray(ids), workspaceID, check.Arg()).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var p promise
			var partSums []byte
			if err := rows.Scan(&p.UploadID, &p.WorkspaceID, &p.Filename, &p.Mimetype, &p.SizeBytes, &p.SHA256, &p.FileID,
				&p.PartBytes, &p.S3UploadID, &partSums); err != nil {
				return err
			}
			for sum := range slices.Chunk(partSums, sha256.Size) {
				p.PartSHA256 = append(p.PartSHA256, sum)
			}
			out[p.UploadID] = p
		}
		return rows.Err()
	})
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, s.batchError("lookup presigned", err)
	}
	if err := check.Settle(); err != nil {
		return nil, tokenError(err)
	}
	return out, nil
}

// committedFiles returns the rows of workspaceID's files among fileIDs
// (without content), whatever their state; missing ones are absent. A
// retried commit answers with them.
func (s *Store) committedFiles(ctx context.Context, workspaceID uuid.UUID, fileIDs []uuid.UUID) (map[uuid.UUID]Record, error) {
	rows, err := s.db.Query(ctx, `
		SELECT file_id, workspace_id, filename, mimetype, size_bytes, sha256, coalesce(s3_key, '')
		FROM pending_uploads
		WHERE file_id = ANY($1) AND workspace_id = $2`, uuidArray(fileIDs), workspaceID)
	if err != nil {
		return nil, wrap("committed files", err)
	}
	out := make(map[uuid.UUID]Record, len(fileIDs))
	for rows.Next() {
		var r Record
		if err := rows.Scan(&r.FileID, &r.WorkspaceID, &r.Filename, &r.Mimetype, &r.SizeBytes, &r.SHA256, &r.s3Key); err != nil {
			rows.Close()
			return nil, wrap("committed files", err)
		}
		out[r.FileID] = r
	}
	return out, wrap("committed files", rows.Err())
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
