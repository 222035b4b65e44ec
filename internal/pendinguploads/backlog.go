package pendinguploads

import (
	"context"
	"time"
)

// BacklogScanLimit bounds the rows one Backlog reads. A larger backlog is
// reported as this many files (Backlog.Truncated), which is already far
// past anything healthy.
const BacklogScanLimit = 100_000

// Backlog is what waits for the workspaces: files neither acked nor
// expired, across every workspace.
type Backlog struct {
	Files int64 // how many
	Bytes int64 // their total size
	// OldestAge is the age (now - created_at) of the oldest of them; 0
	// when there are none.
	OldestAge time.Duration
	// Truncated says the scan stopped at BacklogScanLimit files: Files
	// and Bytes are then lower bounds.
	Truncated bool
}

// Backlog measures the backlog in one statement, on the database's clock.
// It reads the unacked rows through the sweep's partial index on
// expires_at, earliest first, and at most BacklogScanLimit of them; since
// expires_at is created_at + UPLOAD_TTL, the oldest file is among those
// read.
func (s *Store) Backlog(ctx context.Context) (Backlog, error) {
	var b Backlog
	var ageSeconds float64
	err := s.db.QueryRow(ctx, `
		SELECT count(*), coalesce(sum(size_bytes), 0)::bigint,
		       coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
		FROM (SELECT size_bytes, created_at FROM pending_uploads
		      WHERE acked_at IS NULL AND expires_at > now()
		      ORDER BY expires_at
		      LIMIT $1) AS waiting`, BacklogScanLimit).Scan(&b.Files, &b.Bytes, &ageSeconds)
	if err != nil {
		return Backlog{}, wrap("backlog", err)
	}
	if ageSeconds > 0 {
		b.OldestAge = time.Duration(ageSeconds * float64(time.Second))
	}
	b.Truncated = b.Files >= BacklogScanLimit
	return b, nil
}
