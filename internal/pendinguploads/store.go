package pendinguploads

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/semaphore"

	"github.com/pendinguploads/pendinguploads/internal/metrics"
)

// DB is what the Store needs of a database handle: a *pgxpool.Pool in
// production and tests.
type DB interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Settings are a Store's settings, every one required: their one home is
// the configuration (internal/config), which hands them over
// (app.StoreSettings). The Store falls back to no default.
type Settings struct {
	// MaxFileBytes is the per-file cap (MAX_FILE_BYTES).
	MaxFileBytes int64
	// InlineMaxBytes is, with a bucket, the largest file kept inline
	// (INLINE_MAX_BYTES); without one every file is.
	InlineMaxBytes int64
	// TTL sets expires_at of new rows (UPLOAD_TTL).
	TTL time.Duration
	// SweepBatch bounds the rows one sweep statement deletes, so a large
	// backlog never holds one long lock.
	SweepBatch int
	// MultipartThreshold and PartBytes: a presigned file above the
	// threshold, from a client that takes parts, goes in parts of
	// PartBytes (MULTIPART_THRESHOLD_BYTES, MULTIPART_PART_BYTES).
	MultipartThreshold int64
	PartBytes          int64
	// MaxPendingBytes and MaxPendingFiles are the per-workspace quota on
	// what waits, unacked and unexpired (see QuotaError); 0 turns either
	// off.
	MaxPendingBytes int64
	MaxPendingFiles int64
	// LockWait and LockTries bound the wait of Stage and Commit for their
	// workspace's turn under a quota (another call of the workspace
	// counting and storing): each try waits at most LockWait holding a
	// connection, the next comes after a pause of 5 to 15 times LockWait
	// holding none, and after LockTries tries the call is
	// ErrWorkspaceBusy (defaults DefaultLockWait, DefaultLockTries).
	LockWait  time.Duration
	LockTries int
	// RefuseUnknownWorkspaces makes Stage and Commit refuse, with
	// ErrUnknownWorkspace and nothing stored, a workspace the service's
	// own database does not know: one no token was ever made for
	// (workspace_auth_tokens, revoked or not), so that a mistyped UUID
	// does not strand a file where nobody reads (ACCEPT_UNKNOWN_WORKSPACES
	// unset). On the platform's database, which has a workspaces table,
	// that table's foreign key decides, whatever this says.
	RefuseUnknownWorkspaces bool
	// RequestTimeout bounds a request's calls to Postgres and S3
	// (REQUEST_TIMEOUT). Commit alone applies it itself, grown by the
	// bytes it copies (CommitTimeout); 0 leaves Commit to ctx's deadline.
	RequestTimeout time.Duration
	// Scanned holds every new file back until a malware scan's verdict
	// (MALWARE_SCAN; scan.go): its bytes all go to the bucket, small
	// files too, and it waits in scanned_uploads until Decide delivers it.
	// It needs a bucket.
	Scanned bool
	// AcceptUnanchoredOrgTokens (ACCEPT_UNANCHORED_ORG_TOKENS) lets an org
	// token without an anchor workspace (org_api_tokens.org_id NULL:
	// never set, or its anchor deleted) act on every workspace, the
	// platform's legacy rule. Default false: such a token is refused
	// (auth.ErrUnanchored). Each use is logged and counted either way.
	AcceptUnanchoredOrgTokens bool
	// ActivityRetention is how long the sweep keeps the activity_logs
	// rows this service wrote, when the table is ours (a standalone
	// database: migrations created it); 0 keeps them
	// (ACTIVITY_RETENTION). On the platform's database the sweep never
	// touches the table.
	ActivityRetention time.Duration
}

// Store is the pending_uploads table, and the bucket of large files when
// there is one. Change its settings, if at all, before first use; the
// Store is then safe for concurrent use.
type Store struct {
	db     DB
	tokens *tokens // the bearer tokens' SQL, over db
	// bucket, when set, holds files larger than InlineMaxBytes and takes
	// presigned uploads. Nil keeps every file inline in Postgres.
	bucket Bucket
	Settings
	// Now is the clock the sweep reads the bucket's object ages against,
	// and the age of the token tables read (TokenTablesMaxAge) (New sets
	// time.Now).
	Now func() time.Time
	// Logger receives what does not fail a call but an operator should
	// see: a cleanup the bucket refused (default slog.Default()).
	Logger *slog.Logger
	// MaxSweepBatches bounds the batches of each pass of one Sweep
	// (0: 10,000); a pass cut there leaves the rest to the next sweep
	// (SweepResult.Unfinished).
	MaxSweepBatches int
	// Notifier, when set, hears of the files each Stage or Commit stored,
	// after its transaction committed (push.Hints; nil: none).
	Notifier Notifier
	// Metrics receives the store's EMF counters: the uses of unanchored
	// org tokens (nil: none).
	Metrics *metrics.Emitter
	// turns orders, in this process, the calls that count and store for
	// one workspace under a quota (turn.go).
	turns turns
}

func (s *Store) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// New returns a Store over db and, unless bucket is nil, that bucket,
// with settings. It checks the identities its calls act for in the same
// database (access.go). It does no I/O.
func New(db DB, bucket Bucket, settings Settings) *Store {
	s := &Store{db: db, bucket: bucket, Settings: settings, Now: time.Now}
	s.tokens = &tokens{db: db, logger: s.logger, metrics: func() *metrics.Emitter { return s.Metrics },
		now: func() time.Time { return s.Now() }, reading: semaphore.NewWeighted(1)}
	return s
}

// HasBucket reports whether the Store has a bucket, and so offers
// presigned uploads (Presign, Commit) and redirects (SignGet).
func (s *Store) HasBucket() bool { return s.bucket != nil }

// FileCap is the per-file cap in force.
func (s *Store) FileCap() int64 { return s.MaxFileBytes }
