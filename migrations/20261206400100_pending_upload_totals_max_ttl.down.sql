ALTER TABLE pending_upload_totals DROP COLUMN IF EXISTS max_ttl;
