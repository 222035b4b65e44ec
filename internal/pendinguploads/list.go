package pendinguploads

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/auth"
)

// List page sizes.
const (
	DefaultListLimit = 50
	MaxListLimit     = 100
)

// Cursor is a position in one workspace's list: the (created_at, file_id)
// of the last row of the previous page. Files staged by one request share
// created_at; file_id breaks the tie, so every row is listed exactly once.
type Cursor struct {
	CreatedAt time.Time
	FileID    uuid.UUID
}

// maxCursorMicros bounds a cursor's time: the year 3000.
var maxCursorMicros = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// cursorLen is 8 bytes of Unix microseconds (Postgres's precision) and
// 16 bytes of file ID.
const cursorLen = 8 + 16

// Encode returns the cursor as an opaque URL-safe string.
func (c Cursor) Encode() string {
	var b [cursorLen]byte
	binary.BigEndian.PutUint64(b[:8], uint64(c.CreatedAt.UnixMicro()))
	copy(b[8:], c.FileID[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// DecodeCursor parses a string made by Cursor.Encode. Anything else
// returns ErrBadCursor.
func DecodeCursor(s string) (Cursor, error) {
	// Exactly Encode's length: the decoder skips CR and LF even in strict
	// mode, so a length check on the decoded side would let through
	// spellings Encode never makes.
	if len(s) != base64.RawURLEncoding.EncodedLen(cursorLen) {
		return Cursor{}, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != cursorLen {
		return Cursor{}, ErrBadCursor
	}
	micros := int64(binary.BigEndian.Uint64(b[:8]))
	if micros < 0 || micros >= maxCursorMicros {
		// Encode never makes these, and Postgres refuses the far ones.
		return Cursor{}, ErrBadCursor
	}
	var c Cursor
	c.CreatedAt = time.UnixMicro(micros).UTC()
	copy(c.FileID[:], b[8:])
	return c, nil
}

// List returns up to limit visible rows of workspaceID, oldest first,
// starting after the cursor (nil: from the start), without their bytes,
// acting for id (with its check): one round trip. next is nil on the last page. limit
// outside 1..MaxListLimit is clamped.
func (s *Store) List(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, limit int, after *Cursor) (recs []Record, next *Cursor, err error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	a, err := s.access(ctx, id, workspaceID)
	if err != nil {
		return nil, nil, err
	}
	var b pgx.Batch
	named := pgx.StrictNamedArgs{"limit": limit + 1}
	page := ""
	if after != nil {
		page = `(created_at, file_id) > (@after_at::timestamptz, @after_file::uuid)`
		named["after_at"], named["after_file"] = after.CreatedAt, after.FileID
	}
	// One more than asked tells whether another page follows; the rows
	// are scanned in place: no Record per row on the heap.
	recs = make([]Record, 0, limit+1)
	// The page starts at its first unexpired row, found in the index
	// alone (an Index Only Scan of idx_pending_uploads_workspace_page,
	// which carries expires_at): rows past expires_at that the sweep has
	// not reached yet come first in this order (they were staged first).
	// The range starts at now() less the longest time to live of the
	// workspace's rows (its total's max_ttl): every live row was created
	// after it, and a row staged with the same TTL that expired was not,
	// so the expired rows are outside the range, not passed over one index
	// entry each. Rows of a shorter TTL inside it are passed over in the
	// index, without a table read. The page's rows are then read from
	// that row on.
	b.Queue(`SELECT p.file_id, p.workspace_id, p.filename, p.mimetype, p.size_bytes, p.sha256,
		       p.created_at, p.fetched_at, p.expires_at
		FROM (SELECT created_at, file_id FROM pending_uploads
		      WHERE workspace_id = @workspace AND acked_at IS NULL AND expires_at > now()
		        AND created_at > now() - coalesce((SELECT t.max_ttl FROM pending_upload_totals t WHERE t.workspace_id = @workspace),
		                                          interval '100 years')
		        AND `+a.callerMayAct+andEach(page)+`
		      ORDER BY created_at, file_id LIMIT 1) AS first
		CROSS JOIN LATERAL (
		    SELECT * FROM pending_uploads p
		    WHERE p.workspace_id = @workspace AND p.acked_at IS NULL AND p.expires_at > now()
		      AND (p.created_at, p.file_id) >= (first.created_at, first.file_id) AND `+a.callerMayAct+`
		    ORDER BY p.created_at, p.file_id LIMIT @limit) AS p
		ORDER BY p.created_at, p.file_id`, named).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			recs = append(recs, Record{})
			r := &recs[len(recs)-1]
			// IDs scan as [16]byte: uuid.UUID's sql.Scanner would take
			// the slow path through text.
			if err := rows.Scan((*[16]byte)(&r.FileID), (*[16]byte)(&r.WorkspaceID), &r.Filename, &r.Mimetype, &r.SizeBytes, &r.SHA256,
				&r.CreatedAt, &r.FetchedAt, &r.ExpiresAt); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err := a.send(ctx, fmt.Sprintf("list %s", workspaceID), &b); err != nil {
		return nil, nil, err
	}
	if len(recs) > limit {
		recs = recs[:limit]
		last := recs[limit-1]
		next = &Cursor{CreatedAt: last.CreatedAt, FileID: last.FileID}
	}
	return recs, next, nil
}
