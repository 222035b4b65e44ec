-- A presigned upload may carry the SHA-256 its client declared: the PUT is
-- signed with it (S3 refuses other bytes), and the commit refuses an
-- object whose checksum is another. NULL: not declared.
ALTER TABLE presigned_uploads ADD COLUMN IF NOT EXISTS sha256 bytea
    CHECK (sha256 IS NULL OR length(sha256) = 32);
