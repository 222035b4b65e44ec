package pendinguploads

import (
	"encoding/hex"
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
	return string(r.AppendURI(make([]byte, 0, len(uriScheme)+36+1+36)))
}

const uriScheme = "platform-pending:"

// AppendURI appends URI to b, without the string.
func (r Record) AppendURI(b []byte) []byte {
	return appendUUID(append(appendUUID(append(b, uriScheme...), r.WorkspaceID), '/'), r.FileID)
}

// AppendFileID appends the file's ID, as uuid.UUID.String spells it.
func (r Record) AppendFileID(b []byte) []byte { return appendUUID(b, r.FileID) }

// appendUUID appends u in its canonical form, as u.String() spells it,
// without the String's allocation.
func appendUUID(b []byte, u uuid.UUID) []byte {
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return append(b, s[:]...)
}
