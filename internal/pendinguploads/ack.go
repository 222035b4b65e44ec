package pendinguploads

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/auth"
)

// AckResult says how an Ack succeeded.
type AckResult int

const (
	// Acked: this call stamped acked_at.
	Acked AckResult = iota
	// AlreadyAcked: an earlier ack did; acked_at is unchanged.
	AlreadyAcked
	// SweptMeanwhile: the row was there, unacked, when the ack looked it up, and
	// gone (swept) by the time it was to be stamped; or whether it was
	// could not be told. The workspace's intent, "I am done with this
	// file", holds either way. (A concurrent ack that got there first is
	// AlreadyAcked.)
	SweptMeanwhile
)

// Ack marks the unexpired row fileID of workspaceID as acked, acting for id (with its
// check): one round trip, unless it raced. It is idempotent: acking again succeeds (AlreadyAcked) and leaves acked_at
// alone. It returns ErrNotFound for an absent or expired row, and for
// another workspace's row alike (no statement reads a row of another
// workspace: a caller learns nothing of other workspaces' files).
//
// The look-up and the update are one statement; only when they disagree
// (a concurrent ack or sweep) does a second look tell AlreadyAcked from
// SweptMeanwhile, never an error.
func (s *Store) Ack(ctx context.Context, id *auth.Identity, workspaceID, fileID uuid.UUID) (AckResult, error) {
	var ackedAt *time.Time
	var updated int
	var found bool
	a, err := s.access(ctx, id, workspaceID)
	if err != nil {
		return 0, err
	}
	var b pgx.Batch
	b.Queue(`
		WITH target AS (
		    SELECT file_id, acked_at
		    FROM pending_uploads
		    WHERE file_id = @file_id AND expires_at > now() AND workspace_id = @workspace AND `+a.callerMayAct+`
		), upd AS (
		    UPDATE pending_uploads p SET acked_at = now()
		    FROM target t
		    WHERE p.file_id = t.file_id AND t.acked_at IS NULL AND p.acked_at IS NULL AND p.expires_at > now()
		      AND p.workspace_id = @workspace AND `+a.callerMayAct+`
		    RETURNING p.file_id
		)
		SELECT t.acked_at, (SELECT count(*) FROM upd)::int FROM target t`,
		pgx.StrictNamedArgs{"file_id": fileID}).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&ackedAt, &updated); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	err = a.send(ctx, fmt.Sprintf("ack %s", fileID), &b)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, ErrNotFound
	}
	switch {
	case ackedAt != nil:
		return AlreadyAcked, nil
	case updated == 1:
		return Acked, nil
	}
	if s.ackedMeanwhile(ctx, a, workspaceID, fileID) {
		return AlreadyAcked, nil
	}
	return SweptMeanwhile, nil
}

// ackedMeanwhile tells, for an ack that found fileID unacked yet did not
// update it, whether a concurrent ack got there first (the row is acked
// now), rather than a sweep (the row is gone); a look that fails says
// no.
func (s *Store) ackedMeanwhile(ctx context.Context, a *access, workspaceID, fileID uuid.UUID) bool {
	var b pgx.Batch
	var acked bool
	b.Queue(`SELECT EXISTS (SELECT 1 FROM pending_uploads
		WHERE file_id = @file_id AND acked_at IS NOT NULL AND workspace_id = @workspace AND `+a.callerMayAct+`)`,
		pgx.StrictNamedArgs{"file_id": fileID}).QueryRow(
		func(row pgx.Row) error { return row.Scan(&acked) })
	err := a.send(ctx, fmt.Sprintf("ack %s", fileID), &b)
	return err == nil && acked
}
