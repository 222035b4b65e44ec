package pendinguploads

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Get returns the visible (unacked, unexpired) row fileID of workspaceID,
// with Content set when the bytes are inline. It returns ErrNotFound for
// an absent, acked or expired row and ErrWrongWorkspace for another
// workspace's row; in that case the bytes are never read.
func (s *Store) Get(ctx context.Context, workspaceID, fileID uuid.UUID) (Record, error) {
	var r Record
	var key *string
	err := s.db.QueryRow(ctx, `
		SELECT file_id, workspace_id, filename, mimetype, size_bytes, sha256,
		       created_at, fetched_at, acked_at, expires_at, s3_key,
		       CASE WHEN workspace_id = $2 THEN content END
		FROM pending_uploads
		WHERE file_id = $1 AND acked_at IS NULL AND expires_at > now()`,
		fileID, workspaceID).Scan(
		&r.FileID, &r.WorkspaceID, &r.Filename, &r.Mimetype, &r.SizeBytes, &r.SHA256,
		&r.CreatedAt, &r.FetchedAt, &r.AckedAt, &r.ExpiresAt, &key, &r.Content)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, wrap(fmt.Sprintf("get %s", fileID), err)
	}
	if r.WorkspaceID != workspaceID {
		return Record{}, ErrWrongWorkspace
	}
	if key != nil {
		r.S3Key = *key
	}
	return r, nil
}

// MarkFetched stamps fetched_at = now() on the visible row fileID of
// workspaceID; a later fetch moves it again. It returns ErrNotFound when
// no such visible row exists (another workspace's row included).
func (s *Store) MarkFetched(ctx context.Context, workspaceID, fileID uuid.UUID) error {
	tag, err := s.db.Exec(ctx, `
		UPDATE pending_uploads SET fetched_at = now()
		WHERE file_id = $1 AND workspace_id = $2 AND acked_at IS NULL AND expires_at > now()`,
		fileID, workspaceID)
	if err != nil {
		return wrap(fmt.Sprintf("mark fetched %s", fileID), err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Fetch is Get for serving: for a row whose bytes are inline it also
// stamps fetched_at (stamped is true), in the same statement. A row held
// in the blob store is returned unstamped, since its bytes are not read
// yet; the caller stamps it with MarkFetched once it serves them. Every
// case is one statement. Errors are Get's.
func (s *Store) Fetch(ctx context.Context, workspaceID, fileID uuid.UUID) (rec Record, stamped bool, err error) {
	var r Record
	var key *string
	// The outer SELECT reads the row as it was before the UPDATE (a
	// statement's data-modifying CTE is invisible to its own scans); the
	// UPDATE's RETURNING brings the bytes, only for an inline row of this
	// workspace, so another workspace's bytes are never read.
	err = s.db.QueryRow(ctx, `
		WITH u AS (
		    UPDATE pending_uploads SET fetched_at = now()
		    WHERE file_id = $1 AND workspace_id = $2 AND acked_at IS NULL AND expires_at > now() AND s3_key IS NULL
		    RETURNING file_id, fetched_at, content
		)
		SELECT p.file_id, p.workspace_id, p.filename, p.mimetype, p.size_bytes, p.sha256,
		       p.created_at, coalesce(u.fetched_at, p.fetched_at), p.acked_at, p.expires_at, p.s3_key,
		       u.content, u.file_id IS NOT NULL
		FROM pending_uploads p LEFT JOIN u ON u.file_id = p.file_id
		WHERE p.file_id = $1 AND p.acked_at IS NULL AND p.expires_at > now()`,
		fileID, workspaceID).Scan(
		&r.FileID, &r.WorkspaceID, &r.Filename, &r.Mimetype, &r.SizeBytes, &r.SHA256,
		&r.CreatedAt, &r.FetchedAt, &r.AckedAt, &r.ExpiresAt, &key, &r.Content, &stamped)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, false, ErrNotFound
	}
	if err != nil {
		return Record{}, false, wrap(fmt.Sprintf("fetch %s", fileID), err)
	}
	if r.WorkspaceID != workspaceID {
		return Record{}, false, ErrWrongWorkspace
	}
	if key != nil {
		r.S3Key = *key
	}
	return r, stamped, nil
}
