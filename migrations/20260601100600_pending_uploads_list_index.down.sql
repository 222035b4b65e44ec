CREATE INDEX IF NOT EXISTS idx_pending_uploads_workspace_unacked
    ON pending_uploads (workspace_id, created_at)
    WHERE acked_at IS NULL;
DROP INDEX IF EXISTS idx_pending_uploads_workspace_list;
