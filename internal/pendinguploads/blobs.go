package pendinguploads

import (
	"context"
	"fmt"
	"io"
)

// PartialDeleteError is returned by a Blobs.Delete that removed some keys
// and was refused the others (permissions, object lock, …): Refused names
// them, so that a caller can go on with the rest.
type PartialDeleteError struct {
	Refused []string
	Err     error // the first refusal
}

func (e *PartialDeleteError) Error() string {
	return fmt.Sprintf("%d refused, first: %v", len(e.Refused), e.Err)
}
func (e *PartialDeleteError) Unwrap() error { return e.Err }

// Blobs holds file bytes that are too large to keep inline in Postgres.
// Keys are chosen by the Store (never derived from a file name).
//
// Implementations must be safe for concurrent use. Get returns
// ErrBlobNotFound when the key is absent; Delete treats absent keys as
// already deleted, so a retried sweep is harmless.
type Blobs interface {
	// Put stores content under key with the given Content-Type.
	Put(ctx context.Context, key string, content []byte, mimetype string) error
	// Get returns the whole object.
	Get(ctx context.Context, key string) ([]byte, error)
	// Open returns n bytes of the object from offset off, streamed: the
	// reader yields exactly n bytes or an error. It returns
	// ErrBlobNotFound (wrapped) for an absent key, and an error when the
	// object is shorter than off+n.
	Open(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// Size returns the object's size, or ErrBlobNotFound.
	Size(ctx context.Context, key string) (int64, error)
	// Copy copies the object at src to dst, server-side.
	Copy(ctx context.Context, src, dst string) error
	// Delete removes keys (at most 1000 per call are sent in one request;
	// implementations batch larger slices themselves).
	Delete(ctx context.Context, keys []string) error
}
