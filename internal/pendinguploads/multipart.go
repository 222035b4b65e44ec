package pendinguploads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	a, p, err := s.openPresigned(ctx, id, workspaceID, uploadID)
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
	var b pgx.Batch
	var deleted int64
	b.Queue(`DELETE FROM presigned_uploads
		WHERE upload_id = @upload_id AND workspace_id = @workspace AND file_id IS NULL AND `+a.callerMayAct,
		pgx.StrictNamedArgs{"upload_id": uploadID},
	).Exec(func(tag pgconn.CommandTag) error {
		deleted = tag.RowsAffected()
		return nil
	})
	if err := a.send(ctx, "abort", &b); err != nil {
		return err
	}
	if deleted == 0 {
		return ErrUploadCommitted // a commit took it meanwhile
	}
	return nil
}

// openPresigned looks up an uncommitted, unexpired presigned upload of
// workspaceID for id, in one round trip with id's check, and returns the
// access the call's next round trips are sent with beside it.
func (s *Store) openPresigned(ctx context.Context, id *auth.Identity, workspaceID, uploadID uuid.UUID) (*access, presignedUpload, error) {
	if s.bucket == nil {
		return nil, presignedUpload{}, ErrNoBucket
	}
	a, err := s.access(ctx, id, workspaceID)
	if err != nil {
		return nil, presignedUpload{}, err
	}
	uploads, err := s.lookupPresigned(ctx, a, []uuid.UUID{uploadID})
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
	return a, p, nil
}
