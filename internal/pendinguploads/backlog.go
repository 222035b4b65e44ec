package pendinguploads

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// BacklogScanLimit bounds the rows one Backlog reads, so that the report
// after every sweep costs the same (at most this many index entries and
// rows) whatever the table holds. A larger backlog is reported as this
// many files (Backlog.Truncated), which is already far past anything
// healthy: files wait for the next poll, seconds. Exact counts, not the
// planner's estimates (pg_class.reltuples, as of the last ANALYZE, mixes
// expired and waiting rows and lags by hours); 100,000 read cost 0.2 s
// warm and 2-16 s beside a sweep at 5M rows (issue 41).
const BacklogScanLimit = 10_000

// Backlog is what waits for the workspaces: files neither acked nor
// expired, across every workspace.
type Backlog struct {
	Files      int64 // how many
	Bytes      int64 // their total size
	Workspaces int64 // in how many workspaces
	// OldestAge is the age (now - created_at) of the oldest of them; 0
	// when there are none.
	OldestAge time.Duration
	// Truncated says the scan stopped at BacklogScanLimit files: Files
	// and Bytes are then lower bounds.
	Truncated bool
	// The fullest workspaces, against the quota: the most bytes waiting
	// in one workspace (and which), and the most files.
	FullestWorkspace  uuid.UUID
	WorkspaceMaxBytes int64
	WorkspaceMaxFiles int64
}

// Backlog measures the backlog in one statement, on the database's clock.
// It reads the unacked rows through the sweep's partial index on
// expires_at, earliest first, and at most BacklogScanLimit of them; since
// expires_at is created_at + UPLOAD_TTL, the oldest file is among those
// read. The index carries what it reads of each row (migration
// 20261206400200): an Index Only Scan, as many index pages on a small
// table as on a large one.
func (s *Store) Backlog(ctx context.Context) (Backlog, error) {
	var b Backlog
	var ageSeconds float64
	var fullest *uuid.UUID
	err := s.db.QueryRow(ctx, `
		WITH waiting AS (
		    SELECT workspace_id, size_bytes, created_at FROM pending_uploads
		    WHERE acked_at IS NULL AND expires_at > now()
		    ORDER BY expires_at
		    LIMIT $1
		), per_ws AS (
		    SELECT workspace_id, count(*) AS files, sum(size_bytes)::bigint AS bytes FROM waiting GROUP BY workspace_id
		)
		SELECT count(*), coalesce(sum(size_bytes), 0)::bigint,
		       coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8,
		       (SELECT workspace_id FROM per_ws ORDER BY bytes DESC LIMIT 1),
		       (SELECT coalesce(max(bytes), 0) FROM per_ws)::bigint,
		       (SELECT coalesce(max(files), 0) FROM per_ws)::bigint,
		       (SELECT count(*) FROM per_ws)
		FROM waiting`, BacklogScanLimit).Scan(&b.Files, &b.Bytes, &ageSeconds, &fullest, &b.WorkspaceMaxBytes, &b.WorkspaceMaxFiles,
		&b.Workspaces)
	if err != nil {
		return Backlog{}, wrap("backlog", err)
	}
	if ageSeconds > 0 {
		b.OldestAge = time.Duration(ageSeconds * float64(time.Second))
	}
	b.Truncated = b.Files >= BacklogScanLimit
	if fullest != nil {
		b.FullestWorkspace = *fullest
	}
	return b, nil
}

// ExpireBucketFiles expires now every waiting file whose bytes are in the
// bucket, on every workspace, and says how many: the dev server's start
// (make run-s3), when the bucket is a new moto_server that holds none of
// an earlier run's objects, so that the sweep removes those rows instead
// of every pull failing on them until they expire. It acts for the
// schedule, never for a caller.
func (s *Store) ExpireBucketFiles(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, `UPDATE pending_uploads SET expires_at = now()
		WHERE acked_at IS NULL AND expires_at > now() AND s3_key IS NOT NULL`)
	if err != nil {
		return 0, wrap("expire bucket files", err)
	}
	return tag.RowsAffected(), nil
}
