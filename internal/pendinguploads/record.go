package pendinguploads

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Record is one staged file. Content is set only by Get, and only when the
// bytes are inline; use Open to read them wherever they are.
type Record struct {
	FileID      uuid.UUID
	WorkspaceID uuid.UUID
	Filename    string
	Mimetype    string
	SizeBytes   int64
	SHA256      []byte // nil only for rows staged before the column existed
	CreatedAt   time.Time
	FetchedAt   *time.Time // nil until the first fetch
	AckedAt     *time.Time // nil until acked
	ExpiresAt   time.Time

	// S3Key is set when the bytes are in the blob store.
	S3Key   string
	Content []byte
}

// URI is the platform-pending: URI the workspace is handed for the file.
func (r Record) URI() string {
	return fmt.Sprintf("platform-pending:%s/%s", r.WorkspaceID, r.FileID)
}

// Open returns the file's bytes, from the row or from the blob store.
func (s *Store) Open(ctx context.Context, r Record) ([]byte, error) {
	if r.S3Key == "" {
		return r.Content, nil
	}
	if s.Blobs == nil {
		return nil, fmt.Errorf("open %s: %w", r.FileID, ErrNoBlobs)
	}
	b, err := s.Blobs.Get(ctx, r.S3Key)
	if err != nil {
		return nil, wrap(fmt.Sprintf("open %s", r.FileID), err)
	}
	if int64(len(b)) != r.SizeBytes {
		return nil, fmt.Errorf("open %s: object holds %d bytes, row says %d", r.FileID, len(b), r.SizeBytes)
	}
	return b, nil
}
