-- pendinguploads: no transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_pending_uploads_workspace_list
    ON pending_uploads (workspace_id, created_at, file_id)
    WHERE acked_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS idx_pending_uploads_workspace_page;
DROP INDEX CONCURRENTLY IF EXISTS idx_pending_uploads_workspace_pending;
