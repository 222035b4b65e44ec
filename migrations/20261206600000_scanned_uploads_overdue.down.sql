-- pendinguploads: no transaction
DROP INDEX CONCURRENTLY IF EXISTS idx_scanned_uploads_overdue;
