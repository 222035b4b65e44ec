package pendinguploads

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// The presigned uploads' rows (presigned_uploads): what a presign
// declared, until a commit claims each (file_id names the file it became)
// or it expires and the sweep deletes it (sweepPresigned).

// presignedUpload is a presigned upload (a presigned_uploads row): what a
// client was allowed to PUT.
type presignedUpload struct {
	UploadID    uuid.UUID
	WorkspaceID uuid.UUID
	Filename    string
	Mimetype    string
	SizeBytes   int64
	SHA256      []byte // declared; nil when not
	// FileID is the file a commit made of it; uuid.Nil while uncommitted.
	FileID uuid.UUID
	// PartBytes is the part size of a multipart upload; 0 for one PUT.
	PartBytes int64
	// S3UploadID is the bucket's id of a multipart upload, once started.
	S3UploadID string
	// PartSHA256 is each part's declared SHA-256; nil when not declared.
	PartSHA256 [][]byte
}

func (p presignedUpload) committed() bool { return p.FileID != uuid.Nil }

func (p presignedUpload) multipart() bool { return p.PartBytes > 0 }

// partCount is how many parts of PartBytes the file takes.
func (p presignedUpload) partCount() int {
	return int((p.SizeBytes + p.PartBytes - 1) / p.PartBytes)
}

// partSize is the size of part n (from 1): PartBytes, the last shorter.
func (p presignedUpload) partSize(n int) int64 {
	return min(p.PartBytes, p.SizeBytes-int64(n-1)*p.PartBytes)
}

// contentType is what the object is stored as.
func (p presignedUpload) contentType() string {
	if p.Mimetype == "" {
		return octetStream
	}
	return p.Mimetype
}

func (p presignedUpload) stagingKey() string { return stagingKey(p.WorkspaceID, p.UploadID) }

// recordPresigned records what a presign declared, in one round trip
// with id's check, committable until now + commitWindow, and returns who
// the call acts as (the round trip's verdict).
func (s *Store) recordPresigned(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, items []presignedUpload) (*auth.Identity, error) {
	if len(items) == 0 {
		return id, nil
	}
	if len(items) > limits.MaxFiles {
		return nil, ErrTooManyItems
	}
	rt, err := s.roundTrip(ctx, id, workspaceID)
	if err != nil {
		return nil, err
	}
	var adding int64
	for _, it := range items {
		adding += it.SizeBytes
	}
	// The quota, early: without the workspace's lock (the commit checks
	// it exactly).
	q := s.quotaFor(int64(len(items)), adding)
	q.queue(rt, false)
	var inserted int64
	named := presignedColumns(items)
	named["window_micros"] = commitWindow.Microseconds()
	rt.queue(`
		INSERT INTO presigned_uploads (upload_id, workspace_id, filename, mimetype, size_bytes, sha256, expires_at, part_bytes, part_sha256)
		SELECT u.id, u.ws, u.name, u.type, u.size, u.sha256, now() + @window_micros::bigint * interval '1 microsecond',
		       u.part_bytes, u.part_sha256
		FROM unnest(@ids::uuid[], @wss::uuid[], @names::text[], @types::text[], @sizes::bigint[], @sums::bytea[],
		            @part_bytes::bigint[], @part_sums::bytea[])
		     AS u(id, ws, name, type, size, sha256, part_bytes, part_sha256)
		WHERE `+rt.callerMayAct+` AND `+quotaFits, q.args(named)).Exec(func(tag pgconn.CommandTag) error {
		inserted = tag.RowsAffected()
		return nil
	})
	caller, err := rt.send(ctx, "record presigned")
	if err != nil {
		return nil, err
	}
	if inserted != int64(len(items)) {
		if err := q.refusal(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("record presigned: inserted %d rows, want %d", inserted, len(items))
	}
	return caller, nil
}

// presignedColumns is items as named arguments, one array a column
// (@ids, @wss, @names, @types, @sizes, @sums, @part_bytes, @part_sums),
// for unnest.
func presignedColumns(items []presignedUpload) pgx.StrictNamedArgs {
	ids := make([]uuid.UUID, len(items))
	wss := make([]uuid.UUID, len(items))
	names := make([]string, len(items))
	types := make([]string, len(items))
	sizes := make([]int64, len(items))
	sums := make([][]byte, len(items))
	partBytes := make([]*int64, len(items))
	partSums := make([][]byte, len(items))
	for i, it := range items {
		ids[i], wss[i], names[i], types[i], sizes[i], sums[i] = it.UploadID, it.WorkspaceID, it.Filename, it.Mimetype, it.SizeBytes, it.SHA256
		if it.multipart() {
			partBytes[i] = &items[i].PartBytes
			if it.PartSHA256 != nil {
				partSums[i] = bytes.Join(it.PartSHA256, nil)
			}
		}
	}
	return pgx.StrictNamedArgs{"ids": uuidArray(ids), "wss": uuidArray(wss), "names": names, "types": types,
		"sizes": sizes, "sums": sums, "part_bytes": partBytes, "part_sums": partSums}
}

// lookupPresigned returns the unexpired presigned uploads of workspaceID
// among ids, committed ones included (with their FileID), in one round
// trip with id's check, and who the call acts as (the round trip's
// verdict). Missing ones are absent from the map.
func (s *Store) lookupPresigned(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, ids []uuid.UUID) (*auth.Identity, map[uuid.UUID]presignedUpload, error) {
	rt, err := s.roundTrip(ctx, id, workspaceID)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[uuid.UUID]presignedUpload, len(ids))
	rt.queue(`
		SELECT upload_id, workspace_id, filename, mimetype, size_bytes, sha256, coalesce(file_id, '00000000-0000-0000-0000-000000000000'),
		       coalesce(part_bytes, 0), coalesce(s3_upload_id, ''), part_sha256
		FROM presigned_uploads
		WHERE upload_id = ANY(@upload_ids::uuid[]) AND workspace_id = @workspace AND expires_at > now() AND `+rt.callerMayAct,
		pgx.StrictNamedArgs{"upload_ids": uuidArray(ids)},
	).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var u presignedUpload
			var partSums []byte
			if err := rows.Scan(&u.UploadID, &u.WorkspaceID, &u.Filename, &u.Mimetype, &u.SizeBytes, &u.SHA256, &u.FileID,
				&u.PartBytes, &u.S3UploadID, &partSums); err != nil {
				return err
			}
			for sum := range slices.Chunk(partSums, sha256.Size) {
				u.PartSHA256 = append(u.PartSHA256, sum)
			}
			out[u.UploadID] = u
		}
		return rows.Err()
	})
	caller, err := rt.send(ctx, "lookup presigned")
	if err != nil {
		return nil, nil, err
	}
	return caller, out, nil
}

// committedFiles returns the rows of workspaceID's files among fileIDs
// (without content), whatever their state, acting for caller; missing
// ones are absent. A retried commit answers with them.
func (s *Store) committedFiles(ctx context.Context, caller *auth.Identity, workspaceID uuid.UUID, fileIDs []uuid.UUID) (map[uuid.UUID]Record, error) {
	rt, err := s.roundTrip(ctx, caller, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]Record, len(fileIDs))
	rt.queue(`
		SELECT file_id, workspace_id, filename, mimetype, size_bytes, sha256, coalesce(s3_key, '')
		FROM pending_uploads
		WHERE file_id = ANY(@file_ids::uuid[]) AND workspace_id = @workspace AND `+rt.callerMayAct,
		pgx.StrictNamedArgs{"file_ids": uuidArray(fileIDs)},
	).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var r Record
			if err := rows.Scan(&r.FileID, &r.WorkspaceID, &r.Filename, &r.Mimetype, &r.SizeBytes, &r.SHA256, &r.s3Key); err != nil {
				return err
			}
			out[r.FileID] = r
		}
		return rows.Err()
	})
	if _, err := rt.send(ctx, "committed files"); err != nil {
		return nil, err
	}
	return out, nil
}
