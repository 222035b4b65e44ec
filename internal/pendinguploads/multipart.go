package pendinguploads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/pendinguploads/pendinguploads/internal/auth"
)

// A file above MultipartThreshold, from a client that takes parts, goes
// to the bucket as an S3 multipart upload: Presign starts it and signs a
// PUT of each part; a client that lost its connection asks Resume which
// parts the bucket holds (the bucket's word, never the client's) and gets
// fresh PUTs for the others; Abort drops it; Commit completes it from the
// parts the bucket holds, then copies and measures the object as for one
// PUT. The bucket's upload id and key never leave the server.

// Errors of the multipart calls.
var (
	// ErrBadParts is returned (in an *ItemError) by Presign for declared
	// part checksums that do not fit the file's parts.
	ErrBadParts = errors.New("pendinguploads: part checksums do not match the parts")
	// ErrUploadNotFound is returned by Resume and Abort for an upload id
	// that is not one of this workspace's, or expired.
	ErrUploadNotFound = errors.New("pendinguploads: upload not found")
	// ErrUploadCommitted is returned by Resume and Abort for an upload a
	// commit took already.
	ErrUploadCommitted = errors.New("pendinguploads: upload already committed")
	// ErrNotMultipart is returned by Resume for an upload of one PUT.
	ErrNotMultipart = errors.New("pendinguploads: not a multipart upload")
)

// startMultipart starts, in the bucket, the multipart upload of each
// upload that has parts, and records the bucket's ids: one more round
// trip, for presigns with parts only. On failure the uploads started are
// aborted, and the presigned uploads, which no part can reach, expire.
func (s *Store) startMultipart(ctx context.Context, caller *auth.Identity, workspaceID uuid.UUID, uploads []presignedUpload) error {
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
		err = s.recordMultipartIDs(ctx, caller, workspaceID, uploads, idx)
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
// i in idx, in one round trip acting for caller.
func (s *Store) recordMultipartIDs(ctx context.Context, caller *auth.Identity, workspaceID uuid.UUID, uploads []presignedUpload, idx []int) error {
	rt, err := s.roundTrip(ctx, caller, workspaceID)
	if err != nil {
		return err
	}
	for _, i := range idx {
		st := rt.statement()
		rt.queue(st, `UPDATE presigned_uploads SET s3_upload_id = `+st.Arg(uploads[i].S3UploadID)+`
			WHERE upload_id = `+st.Arg(uploads[i].UploadID)+` AND workspace_id = `+st.Workspace()+` AND `+callerMayAct)
	}
	_, err = rt.send(ctx, "presign: record multipart")
	return err
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

// Resume tells, for the multipart upload uploadID of workspaceID (acting
// for id), which parts the bucket holds, and signs fresh PUTs of the
// others: one round trip with id's check, one listing. An upload a
// commit completed but did not commit (it failed after
// CompleteMultipartUpload) has every part received and none to send.
// ErrUploadNotFound for an upload that is not this workspace's, or
// expired; ErrUploadCommitted once committed; ErrNotMultipart for one
// PUT.
func (s *Store) Resume(ctx context.Context, id *auth.Identity, workspaceID, uploadID uuid.UUID) (PresignedPut, error) {
	_, p, err := s.openPresigned(ctx, id, workspaceID, uploadID)
	if err != nil {
		return PresignedPut{}, err
	}
	if !p.multipart() {
		return PresignedPut{}, ErrNotMultipart
	}
	expires := time.Now().Add(presignPutTTL).UTC().Truncate(time.Second)
	received, err := s.bucket.ListParts(ctx, p.stagingKey(), p.S3UploadID)
	if errors.Is(err, ErrBlobNotFound) {
		// The bucket has no such multipart upload any more ("aborted or
		// completed", S3 says), yet its row is live and uncommitted. Abort
		// deletes the row, and the bucket's lifecycle rule aborts only a
		// day later, long after the row expired: so a commit completed it
		// (its parts are one object now), then failed (its deadline, S3)
		// or is still running. Nothing is left to send; a commit takes it.
		return PresignedPut{UploadID: uploadID, Multipart: assembled(p), ExpiresAt: expires}, nil
	}
	if err != nil {
		return PresignedPut{}, wrap("resume: list parts", err)
	}
	plan, err := s.planParts(ctx, p, received)
	if err != nil {
		return PresignedPut{}, err
	}
	return PresignedPut{UploadID: uploadID, Multipart: plan, ExpiresAt: expires}, nil
}

// assembled is the plan of p once a commit completed its multipart
// upload: every part received, none to send.
func assembled(p presignedUpload) *Multipart {
	m := &Multipart{PartBytes: p.PartBytes, PartCount: p.partCount()}
	for n := 1; n <= m.PartCount; n++ {
		m.Received = append(m.Received, Part{Number: int32(n), Size: p.partSize(n)})
	}
	return m
}

// Abort drops the presigned upload uploadID of workspaceID (acting for
// id): its parts and its object in the bucket, then its presigned_uploads row, so
// that no commit can take it. The same errors as Resume, but for
// ErrNotMultipart: an upload of one PUT is aborted too.
func (s *Store) Abort(ctx context.Context, id *auth.Identity, workspaceID, uploadID uuid.UUID) error {
	caller, p, err := s.openPresigned(ctx, id, workspaceID, uploadID)
	if err != nil {
		return err
	}
	if p.multipart() {
		err = s.bucket.AbortMultipart(ctx, p.stagingKey(), p.S3UploadID)
	}
	if err == nil {
		// The object of one PUT, or the one a failed commit assembled
		// from the parts.
		err = s.bucket.Delete(ctx, []string{p.stagingKey()})
	}
	if err != nil {
		return wrap("abort", err)
	}
	rt, err := s.roundTrip(ctx, caller, workspaceID)
	if err != nil {
		return err
	}
	var deleted int64
	st := rt.statement()
	rt.queue(st, `DELETE FROM presigned_uploads
		WHERE upload_id = `+st.Arg(uploadID)+` AND workspace_id = `+st.Workspace()+` AND file_id IS NULL AND `+callerMayAct,
	).Exec(func(tag pgconn.CommandTag) error {
		deleted = tag.RowsAffected()
		return nil
	})
	if _, err := rt.send(ctx, "abort"); err != nil {
		return err
	}
	if deleted == 0 {
		return ErrUploadCommitted // a commit took it meanwhile
	}
	return nil
}

// openPresigned looks up an uncommitted, unexpired presigned upload of
// workspaceID for id, in one round trip with id's check, and returns who
// the call acts as (the round trip's verdict) beside it.
func (s *Store) openPresigned(ctx context.Context, id *auth.Identity, workspaceID, uploadID uuid.UUID) (*auth.Identity, presignedUpload, error) {
	if s.bucket == nil {
		return nil, presignedUpload{}, ErrNoBucket
	}
	caller, uploads, err := s.lookupPresigned(ctx, id, workspaceID, []uuid.UUID{uploadID})
	if err != nil {
		return nil, presignedUpload{}, err
	}
	p, ok := uploads[uploadID]
	switch {
	case !ok:
		return nil, presignedUpload{}, ErrUploadNotFound
	case p.committed():
		return nil, presignedUpload{}, ErrUploadCommitted
	case p.multipart() && p.S3UploadID == "":
		return nil, presignedUpload{}, fmt.Errorf("upload %s: its multipart upload never started: %w", uploadID, ErrUploadNotFound)
	}
	return caller, p, nil
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
