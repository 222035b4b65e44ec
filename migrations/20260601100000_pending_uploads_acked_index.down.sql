DROP INDEX IF EXISTS idx_pending_uploads_acked;
