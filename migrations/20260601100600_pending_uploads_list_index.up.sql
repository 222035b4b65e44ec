-- The poll pages with a keyset cursor on (created_at, file_id): files
-- staged by one request share created_at, so file_id breaks the tie. With
-- file_id in the index the cursor's row comparison is an index condition,
-- and each page reads only the rows it returns. It replaces the seed's
-- (workspace_id, created_at) index, which it covers.
CREATE INDEX IF NOT EXISTS idx_pending_uploads_workspace_list
    ON pending_uploads (workspace_id, created_at, file_id)
    WHERE acked_at IS NULL;
DROP INDEX IF EXISTS idx_pending_uploads_workspace_unacked;
