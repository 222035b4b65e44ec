package pendinguploads

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Record is one staged file, without its bytes: Open reads them, from the
// row or from the bucket.
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

	// s3Key is set when the bytes are in the bucket.
	s3Key string
	// content is the bytes, when Fetch brought them with the row (inline
	// and at most ChunkBytes).
	content []byte
}

// InBucket reports whether the file's bytes are in the bucket (and so
// can be served by a presigned redirect: see SignGet).
func (r Record) InBucket() bool { return r.s3Key != "" }

// URI is the platform-pending: URI the workspace is handed for the file.
func (r Record) URI() string {
	return fmt.Sprintf("platform-pending:%s/%s", r.WorkspaceID, r.FileID)
}
