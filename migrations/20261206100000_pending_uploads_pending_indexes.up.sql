-- pendinguploads: no transaction
-- Built CONCURRENTLY, outside a transaction (migrations.NoTransaction):
-- a plain CREATE INDEX holds a SHARE lock on pending_uploads for the whole
-- build, blocking every stage, ack and sweep, on the platform's database
-- the platform's own writes too (docs/deploy.md).
--
-- The quota's count (stage.go, quotaFits): a workspace's unacked rows
-- keyed by expires_at, their sizes carried in the index, so that the count
-- and sum of what waits is an Index Only Scan over the range
-- expires_at > now() of that workspace: no table page is read, and a row
-- past expires_at that the sweep has not reached yet is outside the range.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_pending_uploads_workspace_pending
    ON pending_uploads (workspace_id, expires_at) INCLUDE (size_bytes)
    WHERE acked_at IS NULL;
-- The list's page (list.go): the keyset order (created_at, file_id) as
-- before, expires_at carried in the index, so that the page's rows are
-- chosen by an Index Only Scan and a row past expires_at is passed over in
-- the index, without reading its table page. It replaces
-- idx_pending_uploads_workspace_list, which it covers.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_pending_uploads_workspace_page
    ON pending_uploads (workspace_id, created_at, file_id) INCLUDE (expires_at)
    WHERE acked_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS idx_pending_uploads_workspace_list;
