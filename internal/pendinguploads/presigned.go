package pendinguploads

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DefaultCommitWindow is how long after a presign its upload may still be
// committed: the PUT URL lives 15 minutes, and a slow client gets time to
// finish the PUT and then commit.
const DefaultCommitWindow = time.Hour

// Presigned is an upload a client was allowed to PUT into the bucket.
type Presigned struct {
	UploadID    uuid.UUID
	WorkspaceID uuid.UUID
	Filename    string
	Mimetype    string
	SizeBytes   int64
	ExpiresAt   time.Time
	// FileID is the file a commit made of it; uuid.Nil while uncommitted.
	FileID uuid.UUID
}

// Committed reports whether a commit consumed the upload.
func (p Presigned) Committed() bool { return p.FileID != uuid.Nil }

// ClaimError is the ErrNotFound of ClaimPresignedTx, naming the first
// upload (in the order given) that was gone: unknown, expired, or taken
// by another commit.
type ClaimError struct {
	UploadID uuid.UUID
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("claim presigned %s: %v", e.UploadID, ErrNotFound)
}

func (e *ClaimError) Unwrap() error { return ErrNotFound }

// StagingKey is where the client puts the bytes.
func (p Presigned) StagingKey() string { return StagingKey(p.WorkspaceID, p.UploadID) }

// RecordPresigned remembers what a presign promised, in one statement, and
// sets each item's ExpiresAt (now + DefaultCommitWindow). Items must carry
// UploadID, WorkspaceID, a sanitized Filename and a size within the cap.
func (s *Store) RecordPresigned(ctx context.Context, items []Presigned) error {
	if len(items) == 0 {
		return nil
	}
	if len(items) > MaxBatch {
		return ErrTooManyItems
	}
	ids := make([]uuid.UUID, len(items))
	wss := make([]uuid.UUID, len(items))
	names := make([]string, len(items))
	types := make([]string, len(items))
	sizes := make([]int64, len(items))
	for i, it := range items {
		ids[i], wss[i], names[i], types[i], sizes[i] = it.UploadID, it.WorkspaceID, it.Filename, it.Mimetype, it.SizeBytes
	}
	rows, err := s.db.Query(ctx, `
		INSERT INTO presigned_uploads (upload_id, workspace_id, filename, mimetype, size_bytes, expires_at)
		SELECT u.id, u.ws, u.name, u.type, u.size, now() + $6::bigint * interval '1 microsecond'
		FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::bigint[]) AS u(id, ws, name, type, size)
		RETURNING upload_id, expires_at`,
		ids, wss, names, types, sizes, DefaultCommitWindow.Microseconds())
	if err != nil {
		return wrap("record presigned", err)
	}
	exp := map[uuid.UUID]time.Time{}
	for rows.Next() {
		var id uuid.UUID
		var t time.Time
		if err := rows.Scan(&id, &t); err != nil {
			rows.Close()
			return wrap("record presigned", err)
		}
		exp[id] = t
	}
	if err := rows.Err(); err != nil {
		return wrap("record presigned", err)
	}
	for i := range items {
		items[i].ExpiresAt = exp[items[i].UploadID]
	}
	return nil
}

// LookupPresigned returns the unexpired presigned uploads of workspaceID
// among ids, committed ones included (with their FileID). Missing ones are
// simply absent from the map.
func (s *Store) LookupPresigned(ctx context.Context, workspaceID uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]Presigned, error) {
	rows, err := s.db.Query(ctx, `
		SELECT upload_id, workspace_id, filename, mimetype, size_bytes, expires_at, coalesce(file_id, '00000000-0000-0000-0000-000000000000')
		FROM presigned_uploads
		WHERE upload_id = ANY($1) AND workspace_id = $2 AND expires_at > now()`, ids, workspaceID)
	if err != nil {
		return nil, wrap("lookup presigned", err)
	}
	out := make(map[uuid.UUID]Presigned, len(ids))
	for rows.Next() {
		var p Presigned
		if err := rows.Scan(&p.UploadID, &p.WorkspaceID, &p.Filename, &p.Mimetype, &p.SizeBytes, &p.ExpiresAt, &p.FileID); err != nil {
			rows.Close()
			return nil, wrap("lookup presigned", err)
		}
		out[p.UploadID] = p
	}
	return out, wrap("lookup presigned", rows.Err())
}

// CommittedFiles returns the rows of workspaceID's files among fileIDs
// (without content), whatever their state; missing ones are absent. A
// retried commit answers with them.
func (s *Store) CommittedFiles(ctx context.Context, workspaceID uuid.UUID, fileIDs []uuid.UUID) (map[uuid.UUID]Record, error) {
	rows, err := s.db.Query(ctx, `
		SELECT file_id, workspace_id, filename, mimetype, size_bytes, sha256, coalesce(s3_key, '')
		FROM pending_uploads
		WHERE file_id = ANY($1) AND workspace_id = $2`, fileIDs, workspaceID)
	if err != nil {
		return nil, wrap("committed files", err)
	}
	out := make(map[uuid.UUID]Record, len(fileIDs))
	for rows.Next() {
		var r Record
		if err := rows.Scan(&r.FileID, &r.WorkspaceID, &r.Filename, &r.Mimetype, &r.SizeBytes, &r.SHA256, &r.S3Key); err != nil {
			rows.Close()
			return nil, wrap("committed files", err)
		}
		out[r.FileID] = r
	}
	return out, wrap("committed files", rows.Err())
}

// ClaimPresignedTx consumes the presigned uploads ids of workspaceID inside
// the caller's transaction, recording fileIDs[i] as the file ids[i]
// became. Unless every one was still there (unexpired, uncommitted), it
// returns a *ClaimError (an ErrNotFound) naming the first that was not:
// a concurrent commit of the same upload loses here, and its transaction
// must roll back. Rows are locked in upload_id order first, so two
// commits sharing uploads wait for each other instead of deadlocking.
func ClaimPresignedTx(ctx context.Context, tx pgx.Tx, workspaceID uuid.UUID, ids, fileIDs []uuid.UUID) error {
	if len(ids) != len(fileIDs) {
		return fmt.Errorf("claim presigned: %d uploads, %d file IDs", len(ids), len(fileIDs))
	}
	if _, err := tx.Exec(ctx, `
		SELECT 1 FROM presigned_uploads WHERE upload_id = ANY($1) AND workspace_id = $2
		ORDER BY upload_id FOR UPDATE`, ids, workspaceID); err != nil {
		return wrap("claim presigned: lock", err)
	}
	rows, err := tx.Query(ctx, `
		UPDATE presigned_uploads p SET file_id = c.fid
		FROM unnest($1::uuid[], $3::uuid[]) AS c(id, fid)
		WHERE p.upload_id = c.id AND p.workspace_id = $2 AND p.expires_at > now() AND p.file_id IS NULL
		RETURNING p.upload_id`, ids, workspaceID, fileIDs)
	if err != nil {
		return wrap("claim presigned", err)
	}
	claimed := make(map[uuid.UUID]bool, len(ids))
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return wrap("claim presigned", err)
		}
		claimed[id] = true
	}
	if err := rows.Err(); err != nil {
		return wrap("claim presigned", err)
	}
	for _, id := range ids {
		if !claimed[id] {
			return &ClaimError{UploadID: id}
		}
	}
	return nil
}

// sweepPresigned deletes expired presigned uploads, in batches.
func (s *Store) sweepPresigned(ctx context.Context) (int, error) {
	total := 0
	for i := 0; i < maxSweepBatches; i++ {
		tag, err := s.db.Exec(ctx, `
			DELETE FROM presigned_uploads WHERE upload_id IN (
			    SELECT upload_id FROM presigned_uploads WHERE expires_at < now() LIMIT $1)`, s.sweepBatch())
		if err != nil {
			return total, wrap("sweep presigned", err)
		}
		total += int(tag.RowsAffected())
		if int(tag.RowsAffected()) < s.sweepBatch() {
			break
		}
	}
	return total, nil
}
