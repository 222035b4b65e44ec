package pendinguploads

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// A presigned upload goes in three steps. Presign records what the client
// declares (name, type, size: a presigned_uploads row, presigned.go) and
// signs a PUT of exactly that many bytes to a staging key; the client puts
// the bytes into the bucket; Commit (commit.go) copies each object to a
// key only the server writes, measures it, and stages its row. Nothing is
// visible to the workspace before the commit.

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
// id, in one round trip with id's check, and signs a PUT of each, in input
// order. It validates every file first, as Stage does (an *ItemError;
// ErrTooManyItems), and returns ErrNoBucket when the Store has no bucket.
func (s *Store) Presign(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, files []Declared) ([]PresignedPut, error) {
	if s.bucket == nil {
		return nil, ErrNoBucket
	}
	if len(files) > limits.MaxFiles {
		return nil, ErrTooManyItems
	}
	uploads := make([]presignedUpload, len(files))
	for i, f := range files {
		u, err := s.presignedUploadOf(f, workspaceID)
		if err != nil {
			return nil, &ItemError{Index: i, Err: err}
		}
		uploads[i] = u
	}
	a, err := s.recordPresigned(ctx, id, workspaceID, uploads)
	if err != nil {
		return nil, err
	}
	if err := s.startMultipart(ctx, a, workspaceID, uploads); err != nil {
		return nil, err
	}
	return s.signPuts(ctx, uploads)
}

// presignedUploadOf is the presigned upload of declared file f, with a
// new upload ID, or why f cannot be one: it fails validation as a staged
// file would, or its checksums do not fit it (ErrBadParts for its parts').
func (s *Store) presignedUploadOf(f Declared, workspaceID uuid.UUID) (presignedUpload, error) {
	u := presignedUpload{UploadID: uuid.New(), WorkspaceID: workspaceID,
		Filename: f.Filename, Mimetype: f.Mimetype, SizeBytes: f.Size, SHA256: f.SHA256}
	if err := validateFile(f.Size, f.Filename, s.FileCap()); err != nil {
		return u, err
	}
	if f.SHA256 != nil && len(f.SHA256) != sha256.Size {
		return u, fmt.Errorf("a SHA-256 of %d bytes", len(f.SHA256))
	}
	if !f.Multipart || f.Size <= s.MultipartThreshold {
		if f.PartSHA256 != nil {
			return u, fmt.Errorf("%w: a file sent in one PUT has no parts", ErrBadParts)
		}
		return u, nil
	}
	u.PartBytes = s.PartBytes
	if f.PartSHA256 != nil && len(f.PartSHA256) != u.partCount() {
		return u, fmt.Errorf("%w: %d declared, the file has %d parts of %d bytes", ErrBadParts, len(f.PartSHA256), u.partCount(), u.PartBytes)
	}
	for _, sum := range f.PartSHA256 {
		if len(sum) != sha256.Size {
			return u, fmt.Errorf("%w: a SHA-256 of %d bytes", ErrBadParts, len(sum))
		}
	}
	u.PartSHA256 = f.PartSHA256
	return u, nil
}

// recordPresigned records what a presign declared, in one round trip
// with id's check, committable until now + commitWindow, and returns the
// access the call's next round trips are sent with (nil for no items:
// no check, no round trip).
func (s *Store) recordPresigned(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, items []presignedUpload) (*access, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if len(items) > limits.MaxFiles {
		return nil, ErrTooManyItems
	}
	a, err := s.access(ctx, id, workspaceID)
	if err != nil {
		return nil, err
	}
	var b pgx.Batch
	var adding int64
	for _, it := range items {
		adding += it.SizeBytes
	}
	// The quota, early: without the workspace's lock (the commit checks
	// it exactly).
	q := s.quotaFor(int64(len(items)), adding)
	q.queue(&b, a, false)
	var inserted int64
	named := presignedColumns(items)
	named["window_micros"] = commitWindow.Microseconds()
	b.Queue(`
		INSERT INTO presigned_uploads (upload_id, workspace_id, filename, mimetype, size_bytes, sha256, expires_at, part_bytes, part_sha256)
		SELECT u.id, @workspace, u.name, u.type, u.size, u.sha256, now() + @window_micros::bigint * interval '1 microsecond',
		       u.part_bytes, u.part_sha256
		FROM unnest(@ids::uuid[], @names::text[], @types::text[], @sizes::bigint[], @sums::bytea[],
		            @part_bytes::bigint[], @part_sums::bytea[])
		     AS u(id, name, type, size, sha256, part_bytes, part_sha256)
		WHERE `+a.callerMayAct+` AND `+quotaFits, q.args(named)).Exec(func(tag pgconn.CommandTag) error {
		inserted = tag.RowsAffected()
		return nil
	})
	if err := a.send(ctx, "record presigned", &b); err != nil {
		return nil, err
	}
	if inserted != int64(len(items)) {
		if err := q.refusal(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("record presigned: inserted %d rows, want %d", inserted, len(items))
	}
	return a, nil
}

// presignedColumns is items as named arguments, one array a column
// (@ids, @names, @types, @sizes, @sums, @part_bytes, @part_sums), for
// unnest; each row's workspace is the checked @workspace, bound by the
// statement.
func presignedColumns(items []presignedUpload) pgx.StrictNamedArgs {
	ids := make([]uuid.UUID, len(items))
	names := make([]string, len(items))
	types := make([]string, len(items))
	sizes := make([]int64, len(items))
	sums := make([][]byte, len(items))
	partBytes := make([]*int64, len(items))
	partSums := make([][]byte, len(items))
	for i, it := range items {
		ids[i], names[i], types[i], sizes[i], sums[i] = it.UploadID, it.Filename, it.Mimetype, it.SizeBytes, it.SHA256
		if it.multipart() {
			partBytes[i] = &items[i].PartBytes
			if it.PartSHA256 != nil {
				partSums[i] = bytes.Join(it.PartSHA256, nil)
			}
		}
	}
	return pgx.StrictNamedArgs{"ids": uuidArray(ids), "names": names, "types": types,
		"sizes": sizes, "sums": sums, "part_bytes": partBytes, "part_sums": partSums}
}

// startMultipart starts, in the bucket, the multipart upload of each
// upload that has parts, and records the bucket's ids: one more round
// trip, for presigns with parts only. On failure the uploads started are
// aborted, and the presigned uploads, which no part can reach, expire.
func (s *Store) startMultipart(ctx context.Context, a *access, workspaceID uuid.UUID, uploads []presignedUpload) error {
	var idx []int
	for i, p := range uploads {
		if p.multipart() {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(objectConcurrency)
	for _, i := range idx {
		p := &uploads[i]
		g.Go(func() error {
			id, err := s.bucket.CreateMultipart(gctx, p.stagingKey(), p.contentType(), p.PartSHA256 != nil)
			if err != nil {
				return wrap("presign: start multipart", err)
			}
			p.S3UploadID = id
			return nil
		})
	}
	err := g.Wait()
	if err == nil {
		err = s.recordMultipartIDs(ctx, a, workspaceID, uploads, idx)
	}
	if err != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupBudget)
		defer cancel()
		for _, i := range idx {
			if id := uploads[i].S3UploadID; id != "" {
				_ = s.bucket.AbortMultipart(actx, uploads[i].stagingKey(), id)
			}
		}
		return err
	}
	return nil
}

// recordMultipartIDs records the bucket's id of each upload uploads[i],
// i in idx, in one round trip acting for a's caller.
func (s *Store) recordMultipartIDs(ctx context.Context, a *access, workspaceID uuid.UUID, uploads []presignedUpload, idx []int) error {
	var b pgx.Batch
	for _, i := range idx {
		b.Queue(`UPDATE presigned_uploads SET s3_upload_id = @s3_upload_id
			WHERE upload_id = @upload_id AND workspace_id = @workspace AND `+a.callerMayAct,
			pgx.StrictNamedArgs{"s3_upload_id": uploads[i].S3UploadID, "upload_id": uploads[i].UploadID})
	}
	return a.send(ctx, "presign: record multipart", &b)
}

// signPuts signs, for each recorded upload in order, its PUT, or the
// PUT of each of its parts.
func (s *Store) signPuts(ctx context.Context, uploads []presignedUpload) ([]PresignedPut, error) {
	expires := time.Now().Add(presignPutTTL).UTC().Truncate(time.Second)
	out := make([]PresignedPut, len(uploads))
	for i, u := range uploads {
		out[i] = PresignedPut{UploadID: u.UploadID, ExpiresAt: expires}
		if u.multipart() {
			plan, err := s.planParts(ctx, u, nil)
			if err != nil {
				return nil, err
			}
			out[i].Multipart = plan
			continue
		}
		url, headers, err := s.bucket.PresignPut(ctx, u.stagingKey(), u.SizeBytes, u.contentType(), u.SHA256, presignPutTTL)
		if err != nil {
			return nil, wrap("presign put", err)
		}
		out[i].URL, out[i].Headers = url, headers
	}
	return out, nil
}

// planParts is p's multipart plan: the parts the bucket holds (received, as
// ListParts returned them; nil for none yet) and a signed PUT of every
// other part.
func (s *Store) planParts(ctx context.Context, p presignedUpload, received []Part) (*Multipart, error) {
	m := &Multipart{PartBytes: p.PartBytes, PartCount: p.partCount(), Received: received}
	have := map[int32]bool{}
	for _, r := range received {
		if r.Size == p.partSize(int(r.Number)) {
			have[r.Number] = true
		}
	}
	for n := 1; n <= m.PartCount; n++ {
		if have[int32(n)] {
			continue
		}
		var sum []byte
		if p.PartSHA256 != nil {
			sum = p.PartSHA256[n-1]
		}
		size := p.partSize(n)
		url, headers, err := s.bucket.PresignPart(ctx, p.stagingKey(), p.S3UploadID, int32(n), size, sum, presignPutTTL)
		if err != nil {
			return nil, wrap("presign part", err)
		}
		m.Parts = append(m.Parts, PartPut{Number: int32(n), Size: size, URL: url, Headers: headers})
	}
	return m, nil
}
