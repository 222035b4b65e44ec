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

// Presigned is an upload a client was allowed to PUT into the bucket, not
// yet committed.
type Presigned struct {
	UploadID    uuid.UUID
	WorkspaceID uuid.UUID
	Filename    string
	Mimetype    string
	SizeBytes   int64
	ExpiresAt   time.Time
}

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

// LookupPresigned returns the uncommitted, unexpired presigned uploads of
// workspaceID among ids. Missing ones are simply absent from the map.
func (s *Store) LookupPresigned(ctx context.Context, workspaceID uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]Presigned, error) {
	rows, err := s.db.Query(ctx, `
		SELECT upload_id, workspace_id, filename, mimetype, size_bytes, expires_at
		FROM presigned_uploads
		WHERE upload_id = ANY($1) AND workspace_id = $2 AND expires_at > now()`, ids, workspaceID)
	if err != nil {
		return nil, wrap("lookup presigned", err)
	}
	out := make(map[uuid.UUID]Presigned, len(ids))
	for rows.Next() {
		var p Presigned
		if err := rows.Scan(&p.UploadID, &p.WorkspaceID, &p.Filename, &p.Mimetype, &p.SizeBytes, &p.ExpiresAt); err != nil {
			rows.Close()
			return nil, wrap("lookup presigned", err)
		}
		out[p.UploadID] = p
	}
	return out, wrap("lookup presigned", rows.Err())
}

// ClaimPresignedTx consumes the presigned uploads ids of workspaceID inside
// the caller's transaction. It returns ErrNotFound unless every one was
// still there (unexpired, uncommitted): a concurrent commit of the same
// upload loses here, and its transaction must roll back.
func ClaimPresignedTx(ctx context.Context, tx pgx.Tx, workspaceID uuid.UUID, ids []uuid.UUID) error {
	tag, err := tx.Exec(ctx, `
		DELETE FROM presigned_uploads
		WHERE upload_id = ANY($1) AND workspace_id = $2 AND expires_at > now()`, ids, workspaceID)
	if err != nil {
		return wrap("claim presigned", err)
	}
	if int(tag.RowsAffected()) != len(ids) {
		return fmt.Errorf("claim presigned: %d of %d: %w", tag.RowsAffected(), len(ids), ErrNotFound)
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
