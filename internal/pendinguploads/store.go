package pendinguploads

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// Defaults for the Store's optional settings.
const (
	DefaultTTL            = 24 * time.Hour
	DefaultInlineMaxBytes = 256 << 10
	DefaultSweepBatch     = 1000
	// MaxBatch bounds one batch (a stage, a presign): the 64 files one
	// upload request may carry (max_attachments_per_message).
	MaxBatch = limits.MaxFiles
)

// DB is what the Store needs of a database handle: a *pgxpool.Pool in
// production and tests.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store is the pending_uploads table (and, optionally, a blob store for
// large files). Set the optional fields before first use; the Store is
// then safe for concurrent use.
type Store struct {
	db DB

	// Blobs, when set, holds files larger than InlineMaxBytes. Nil keeps
	// every file inline in Postgres.
	Blobs Blobs
	// MaxFileBytes is the per-file cap, at most MaxFileBytesCap (default
	// DefaultMaxFileBytes): MAX_FILE_BYTES, the one source every cap of
	// the service reads (see FileCap).
	MaxFileBytes int64
	// InlineMaxBytes is the largest file kept inline when Blobs is set
	// (default DefaultInlineMaxBytes).
	InlineMaxBytes int64
	// TTL sets expires_at of new rows (default DefaultTTL).
	TTL time.Duration
	// SweepBatch bounds the rows one sweep statement deletes, so a large
	// backlog never holds one long lock (default DefaultSweepBatch).
	SweepBatch int
	// NewID makes file IDs (default uuid.New). Tests may inject their own.
	NewID func() uuid.UUID
}

// New returns a Store over db. It does no I/O.
func New(db DB) *Store {
	return &Store{db: db}
}

func (s *Store) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultTTL
}

// FileCap is the per-file cap in force: MaxFileBytes, or its default.
func (s *Store) FileCap() int64 {
	if s.MaxFileBytes > 0 {
		return min(s.MaxFileBytes, MaxFileBytesCap)
	}
	return DefaultMaxFileBytes
}

func (s *Store) inlineMax() int64 {
	if s.Blobs == nil {
		return s.FileCap()
	}
	if s.InlineMaxBytes > 0 {
		return s.InlineMaxBytes
	}
	return DefaultInlineMaxBytes
}

func (s *Store) sweepBatch() int {
	if s.SweepBatch > 0 {
		return s.SweepBatch
	}
	return DefaultSweepBatch
}

func (s *Store) newID() uuid.UUID {
	if s.NewID != nil {
		return s.NewID()
	}
	return uuid.New()
}

// ObjectKey is the blob key of a committed file: chosen by the server from
// IDs, never from the file's name.
func ObjectKey(workspaceID, fileID uuid.UUID) string {
	return fmt.Sprintf("objects/%s/%s", workspaceID, fileID)
}

// StagingKey is the blob key a presigned upload writes to before it is
// committed. Objects under StagingPrefix that are never committed are
// removed by the bucket's lifecycle rule.
func StagingKey(workspaceID, uploadID uuid.UUID) string {
	return fmt.Sprintf("%s%s/%s", StagingPrefix, workspaceID, uploadID)
}

// Key prefixes in the bucket.
const (
	ObjectPrefix  = "objects/"
	StagingPrefix = "staging/"
)
