-- The sweep's retention pass: acked rows whose acked_at is older than the
-- retention window. Without it that pass scans the whole table.
CREATE INDEX IF NOT EXISTS idx_pending_uploads_acked
    ON pending_uploads (acked_at)
    WHERE acked_at IS NOT NULL;
