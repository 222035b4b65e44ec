-- pendinguploads: no transaction
-- Built CONCURRENTLY, outside a transaction, as 20261206100000's.
--
-- The overdue scans' pass (Store.DecideOverdue: state 'pending', created
-- before SCAN_TIMEOUT, oldest first, at most 1,000) read every waiting
-- row of idx_scanned_uploads_waiting older than the timeout, held ones
-- included, and dropped the held ones from the table's pages: at 1M rows,
-- 9,000 of them held, 9,893 rows and 9,964 buffers for 989 returned
-- (EXPLAIN (ANALYZE, BUFFERS)). Keyed on created_at over pending rows
-- only, it reads the rows it returns: 989 rows, 993 buffers.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_scanned_uploads_overdue
    ON scanned_uploads (created_at)
    WHERE state = 'pending';
