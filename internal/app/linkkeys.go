package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// ErrNoLinkKey is LinkKeysFromDatabase's error when download_link_keys
// holds no key: the schema was not migrated (the migration writes the
// first one), or every row was deleted by hand.
var ErrNoLinkKey = errors.New("no download link key in download_link_keys (pendingctl migrate up writes the first; pendingctl linkkey rotate another)")

// linkKeysSQL reads the current key and the one it replaced: the newest
// two rows, by the primary key's order within one created_at.
const linkKeysSQL = `SELECT key, created_at FROM download_link_keys ORDER BY created_at DESC, id DESC LIMIT 2`

// LinkKeysFromDatabase reads the download links' keys from the table
// download_link_keys: its newest row is Current, created when it replaced
// the row before it (Rotated), which is Previous, accepted for the links'
// overlap ("" before the first rotation). It reads two rows at most;
// ErrNoLinkKey when there is none.
func LinkKeysFromDatabase(ctx context.Context, db pendinguploads.DB) (downloadlink.Keys, error) {
	rows, err := db.Query(ctx, linkKeysSQL)
	if err != nil {
		return downloadlink.Keys{}, fmt.Errorf("download_link_keys: %w", err)
	}
	type row struct {
		Key       string
		CreatedAt time.Time
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return downloadlink.Keys{}, fmt.Errorf("download_link_keys: %w", err)
	}
	if len(got) == 0 {
		return downloadlink.Keys{}, ErrNoLinkKey
	}
	k := downloadlink.Keys{Current: got[0].Key, Rotated: got[0].CreatedAt}
	if len(got) > 1 {
		k.Previous = got[1].Key
	}
	return k, nil
}

// RotatedLinkKey is what RotateLinkKey did: the new key's id (the one
// links carry, downloadlink.KeyID) and time, the key it replaced (its
// id, "" when there was none), and how many older keys it deleted.
type RotatedLinkKey struct {
	KeyID         string    `json:"key_id"`
	CreatedAt     time.Time `json:"created_at"`
	PreviousKeyID string    `json:"previous_key_id,omitempty"`
	Deleted       int       `json:"deleted"`
}

// rotateLinkKeySQL adds a new key (64 hex digits from two random UUIDs:
// gen_random_uuid() is pg_strong_random()'s, as the migration's first
// key) and, in the same statement, deletes every key older than the one
// it replaces: the statement's snapshot does not see the new row, so the
// newest row it sees is the one the new key replaces, which links keep
// for their overlap. Two rows remain.
const rotateLinkKeySQL = `
WITH added AS (
    INSERT INTO download_link_keys (key)
    VALUES (replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''))
    RETURNING key, created_at
), replaced AS (
    SELECT id, key FROM download_link_keys ORDER BY created_at DESC, id DESC LIMIT 1
), deleted AS (
    DELETE FROM download_link_keys WHERE id NOT IN (SELECT id FROM replaced) RETURNING 1
)
SELECT added.key, added.created_at, (SELECT key FROM replaced), (SELECT count(*) FROM deleted)
FROM added`

// RotateLinkKey makes a new download link key the current one, in one
// statement that also deletes the keys older than the one it replaces.
// Links of the replaced key keep opening for DOWNLOAD_LINK_TTL plus
// downloadlink.KeysMaxAge after it; links of the keys deleted stop: a
// second rotation within that overlap voids the first one's links. The
// keys are read back only to name them by their ids: none is returned.
func RotateLinkKey(ctx context.Context, db pendinguploads.DB) (RotatedLinkKey, error) {
	var (
		key      string
		r        RotatedLinkKey
		previous *string
		deleted  int64
	)
	if err := db.QueryRow(ctx, rotateLinkKeySQL).Scan(&key, &r.CreatedAt, &previous, &deleted); err != nil {
		return RotatedLinkKey{}, fmt.Errorf("download_link_keys: %w", err)
	}
	r.KeyID, r.Deleted = downloadlink.KeyID(key), int(deleted)
	if previous != nil {
		r.PreviousKeyID = downloadlink.KeyID(*previous)
	}
	return r, nil
}
