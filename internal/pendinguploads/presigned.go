package pendinguploads

import (
	"github.com/google/uuid"
)

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
func (p presignedUpload) stagingKey() string { return stagingKey(p.WorkspaceID, p.UploadID) }
