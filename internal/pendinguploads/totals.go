package pendinguploads

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// A workspace's running total (pending_upload_totals) is the count and
// bytes of its unacked rows not yet swept. The statements that change
// them keep it, in the same statement: queueInsert (Stage, Commit) adds
// what it inserts, Ack takes off what it acks, the sweep what unacked it
// deletes. The quota reads it (pendingFiles, pendingBytes).
//
// Rows written by anyone else (on the platform's database, the
// platform's own code; an older build during a deploy) are not in it:
// the total drifts from the rows. Recount and RecountAll repair it.

// Total is a workspace's running total: its unacked rows not yet swept.
type Total struct {
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
}

// Recount sets workspaceID's running total to a count of its rows, and
// returns what it held before (zero when there was none) and after: for
// the operator (pendingctl recount), never for a caller. It costs one
// read of the workspace's unacked rows (idx_pending_uploads_workspace_pending).
//
// It is exact while the workspace is in use: it takes the total's row
// lock first, in a transaction of its own, and counts in a later
// statement, whose snapshot sees every change whose statement had moved
// the total before (a statement that stages, acks or sweeps changes rows
// and total together and commits both); a change not yet committed then
// waits for the lock and adds its own difference to the recounted total.
func (s *Store) Recount(ctx context.Context, workspaceID uuid.UUID) (was, now Total, err error) {
	err = pgx.BeginTxFunc(ctx, s.db, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO pending_upload_totals (workspace_id) VALUES ($1) ON CONFLICT DO NOTHING`,
			workspaceID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT files, bytes FROM pending_upload_totals WHERE workspace_id = $1 FOR UPDATE`,
			workspaceID).Scan(&was.Files, &was.Bytes); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			UPDATE pending_upload_totals t SET files = c.files, bytes = c.bytes, max_ttl = c.max_ttl
			FROM (SELECT count(*) AS files, coalesce(sum(size_bytes), 0)::bigint AS bytes,
			             max(expires_at - created_at) AS max_ttl FROM pending_uploads
			      WHERE workspace_id = $1 AND acked_at IS NULL) c
			WHERE t.workspace_id = $1
			RETURNING t.files, t.bytes`, workspaceID).Scan(&now.Files, &now.Bytes)
	})
	if err != nil {
		return Total{}, Total{}, wrap("recount", err)
	}
	return was, now, nil
}

// RecountResult is what one RecountAll did.
type RecountResult struct {
	Workspaces int `json:"workspaces"` // recounted
	Repaired   int `json:"repaired"`   // whose total was not its count
	// Unfinished says ctx ended first; the next run starts over.
	Unfinished bool `json:"unfinished,omitempty"`
}

// RecountAll recounts (Recount) every workspace with unacked rows or a
// running total, one transaction each, in workspace order: each next
// workspace is one descent of idx_pending_uploads_workspace_pending and of
// the totals' primary key. It stops when ctx ends (Unfinished).
func (s *Store) RecountAll(ctx context.Context) (RecountResult, error) {
	var res RecountResult
	var from uuid.UUID // the nil UUID: no workspace is below it
	first := true
	for {
		if ctx.Err() != nil {
			res.Unfinished = true
			return res, nil
		}
		var next *uuid.UUID
		err := s.db.QueryRow(ctx, `
			SELECT least(
			    (SELECT workspace_id FROM pending_uploads WHERE acked_at IS NULL AND workspace_id >= $1 AND ($2 OR workspace_id > $1)
			     ORDER BY workspace_id LIMIT 1),
			    (SELECT workspace_id FROM pending_upload_totals WHERE workspace_id >= $1 AND ($2 OR workspace_id > $1)
			     ORDER BY workspace_id LIMIT 1))`, from, first).Scan(&next)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				res.Unfinished = true
				return res, nil
			}
			return res, wrap("recount", err)
		}
		if next == nil {
			return res, nil
		}
		was, now, err := s.Recount(ctx, *next)
		if err != nil {
			return res, err
		}
		res.Workspaces++
		if was != now {
			res.Repaired++
			s.logger().Warn("pending total repaired", "workspace_id", *next,
				"files_was", was.Files, "files", now.Files, "bytes_was", was.Bytes, "bytes", now.Bytes)
		}
		from, first = *next, false
	}
}
