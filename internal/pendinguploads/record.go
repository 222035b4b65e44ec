package pendinguploads

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Record is one staged file. Content is set only by Fetch, and only when
// the bytes are inline and small; use Open to read them wherever they are.
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
