package pendinguploads

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/google/uuid"

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
	caller, err := s.recordPresigned(ctx, id, workspaceID, uploads)
	if err != nil {
		return nil, err
	}
	if err := s.startMultipart(ctx, caller, workspaceID, uploads); err != nil {
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
