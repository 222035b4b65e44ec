-- A running total a workspace of what waits: the unacked rows of
-- pending_uploads not yet swept, their count and bytes. The statements
-- that stage (an INSERT), ack (acked_at set) and sweep (an unacked row
-- deleted) change it in the same statement as the rows, so the quota reads
-- one row here instead of one index entry a pending file
-- (docs/how-it-works.md, "The quota's count, and a workspace's turn").
-- Rows the service did not write (the platform's own code) are not in it:
-- pendingctl recount repairs a workspace's total (docs/operating.md).
CREATE TABLE IF NOT EXISTS pending_upload_totals (
    workspace_id uuid PRIMARY KEY,
    files bigint NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0
);
COMMENT ON TABLE pending_upload_totals IS 'created by pendinguploads';

-- The backfill: one read of the rows already there (the partial index of
-- unacked rows), no lock on pending_uploads beyond a read's. Rows an
-- older build stages, acks or sweeps after it ran, until the new build
-- serves every request, are not in it: deploy.md runs pendingctl recount
-- --all once the new build is live.
INSERT INTO pending_upload_totals (workspace_id, files, bytes)
SELECT workspace_id, count(*), coalesce(sum(size_bytes), 0)
FROM pending_uploads WHERE acked_at IS NULL
GROUP BY workspace_id
ON CONFLICT (workspace_id) DO NOTHING;
