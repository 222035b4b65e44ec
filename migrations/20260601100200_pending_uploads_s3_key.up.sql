-- Large files live in S3; the row then carries the object key instead of
-- the bytes. Exactly one of the two is set, so no row can be served empty.
ALTER TABLE pending_uploads ADD COLUMN IF NOT EXISTS s3_key text;
ALTER TABLE pending_uploads ALTER COLUMN content DROP NOT NULL;
ALTER TABLE pending_uploads
    ADD CONSTRAINT pending_uploads_one_location
    CHECK ((content IS NULL) <> (s3_key IS NULL));
