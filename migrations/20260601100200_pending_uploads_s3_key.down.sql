-- Rows whose bytes are in S3 cannot be kept by the older schema: the down
-- migration refuses rather than silently dropping them.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pending_uploads WHERE s3_key IS NOT NULL) THEN
        RAISE EXCEPTION 'pending_uploads has rows stored in S3; sweep or drain them before migrating down';
    END IF;
END $$;
ALTER TABLE pending_uploads DROP CONSTRAINT IF EXISTS pending_uploads_one_location;
ALTER TABLE pending_uploads ALTER COLUMN content SET NOT NULL;
ALTER TABLE pending_uploads DROP COLUMN IF EXISTS s3_key;
