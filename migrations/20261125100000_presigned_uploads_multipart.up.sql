-- A presigned upload may go to the bucket in parts (an S3 multipart
-- upload): part_bytes is its part size (NULL: one PUT), s3_upload_id the
-- S3 upload it writes (set once S3 created it; it never leaves the
-- server), part_sha256 each part's SHA-256 when the client declared them,
-- 32 bytes each, in part order (every part URL, fresh ones on resume
-- included, is then bound to its part's).
ALTER TABLE presigned_uploads
    ADD COLUMN IF NOT EXISTS part_bytes bigint CHECK (part_bytes IS NULL OR part_bytes > 0),
    ADD COLUMN IF NOT EXISTS s3_upload_id text,
    ADD COLUMN IF NOT EXISTS part_sha256 bytea CHECK (part_sha256 IS NULL OR length(part_sha256) % 32 = 0);
