-- pendinguploads: no transaction
-- Built CONCURRENTLY, outside a transaction, as 20261206100000's.
--
-- The expiry index (the sweep's expired pass, the quota's expired rows,
-- the backlog report) carries what the backlog report reads of each row
-- (backlog.go: workspace_id, size_bytes, created_at), so that its bounded
-- read of the first rows by expires_at is an Index Only Scan: the same
-- number of index pages on a table of 10 thousand rows as of 5 million,
-- not one table page a row wherever the rows lie (make scale). Its key
-- and condition are the old index's, so the sweep's plans are unchanged;
-- it takes the old one's name once built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_pending_uploads_expires_covering
    ON pending_uploads (expires_at) INCLUDE (workspace_id, size_bytes, created_at)
    WHERE acked_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS idx_pending_uploads_expires;
ALTER INDEX IF EXISTS idx_pending_uploads_expires_covering RENAME TO idx_pending_uploads_expires;
