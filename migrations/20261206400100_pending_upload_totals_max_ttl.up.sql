-- The longest time to live (expires_at - created_at) of the unacked rows
-- a workspace's total has counted: every live row was created after
-- now() - max_ttl, so the list starts its index range there and passes
-- over no expired row that the sweep has not yet deleted, one index entry
-- each (docs/how-it-works.md, "The list"). It only grows as rows are
-- staged (a TTL lowered later keeps the longer one, so the bound holds for
-- the rows staged before); pendingctl recount sets it from the rows. NULL:
-- not known, no bound.
ALTER TABLE pending_upload_totals ADD COLUMN IF NOT EXISTS max_ttl interval;

-- The backfill, as the totals' own: one read of the unacked rows.
UPDATE pending_upload_totals t SET max_ttl = m.ttl
FROM (SELECT workspace_id, max(expires_at - created_at) AS ttl FROM pending_uploads
      WHERE acked_at IS NULL GROUP BY workspace_id) m
WHERE t.workspace_id = m.workspace_id AND t.max_ttl IS NULL;
