-- pendinguploads: no transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_pending_uploads_expires_plain
    ON pending_uploads (expires_at)
    WHERE acked_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS idx_pending_uploads_expires;
ALTER INDEX IF EXISTS idx_pending_uploads_expires_plain RENAME TO idx_pending_uploads_expires;
