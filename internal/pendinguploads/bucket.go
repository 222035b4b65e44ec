package pendinguploads

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Bucket is the object store that holds files too large to keep inline,
// and lets clients talk to it directly through presigned requests. The
// Store alone chooses its keys (never from a file's name); s3blobs.Store
// is the one in production.
//
// Implementations must be safe for concurrent use. Open and CopyMeasured
// return an error wrapping ErrBlobNotFound for an absent key; Delete treats absent
// keys as already deleted, so a retried sweep is harmless.
type Bucket interface {
	// Put stores content under key with the given Content-Type.
	Put(ctx context.Context, key string, content []byte, mimetype string) error
	// Open returns n bytes of the object from offset off, streamed: the
	// reader yields exactly n bytes or an error, and an object shorter
	// than off+n is an error.
	Open(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// CopyMeasured copies the object at src to dst, server-side, and
	// returns the copy's size and SHA-256: the checksum the object store
	// computed or verified, without reading the bytes through this
	// process when it has one.
	CopyMeasured(ctx context.Context, src, dst string) (int64, []byte, error)
	// Delete removes keys; a refusal of some keys is a
	// *PartialDeleteError naming them.
	Delete(ctx context.Context, keys []string) error
	// PresignPut signs a PUT of exactly size bytes of mimetype to key,
	// and, with sha256, of bytes of that SHA-256 only (the store refuses
	// others); it returns the URL and the headers the client must send.
	PresignPut(ctx context.Context, key string, size int64, mimetype string, sha256 []byte, ttl time.Duration) (string, map[string]string, error)
	// PresignGet signs a GET of key whose answer carries the given
	// Content-Disposition and Content-Type.
	PresignGet(ctx context.Context, key, disposition, contentType string, ttl time.Duration) (string, error)
	// List returns up to limit objects under prefix, in key order.
	List(ctx context.Context, prefix string, limit int) ([]Blob, error)

	// CreateMultipart starts a multipart upload to key and returns its id
	// (the bucket's; it never leaves the server); with checksums, each part
	// must carry its SHA-256.
	CreateMultipart(ctx context.Context, key, mimetype string, checksums bool) (string, error)
	// PresignPart signs the PUT of part n (from 1) of size bytes, and with
	// sha256 of those bytes only.
	PresignPart(ctx context.Context, key, uploadID string, n int32, size int64, sha256 []byte, ttl time.Duration) (string, map[string]string, error)
	// ListParts returns the parts the bucket holds, in order; an upload
	// that is no more (completed or aborted) wraps ErrBlobNotFound.
	ListParts(ctx context.Context, key, uploadID string) ([]Part, error)
	// CompleteMultipart assembles the object from parts (as ListParts
	// returned them); an upload that is no more wraps ErrBlobNotFound.
	CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error
	// AbortMultipart drops the upload and its parts; one that is no more
	// is no error.
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// Part is one part of a multipart upload, as the bucket holds it.
type Part struct {
	Number         int32
	Size           int64
	ETag           string
	ChecksumSHA256 string // base64, when the upload keeps checksums
}

// Blob is an object as Bucket.List lists it.
type Blob struct {
	Key      string
	Modified time.Time
}

// PartialDeleteError is the error of a Bucket.Delete that removed some
// keys and was refused the others (permissions, object lock, …): Refused
// names them, so that the sweep keeps their rows and goes on with the rest.
type PartialDeleteError struct {
	Refused []string
	Err     error // the first refusal
}

func (e *PartialDeleteError) Error() string {
	return fmt.Sprintf("%d refused, first: %v", len(e.Refused), e.Err)
}
func (e *PartialDeleteError) Unwrap() error { return e.Err }
