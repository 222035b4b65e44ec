-- The per-file cap goes to 100 MiB (MAX_FILE_BYTES may be set up to it),
-- as the platform's own cap went. The CHECK keeps the name Postgres gave
-- the seed's column CHECK, pending_uploads_size_bytes_check, which is also
-- the platform's name for it: a platform database that already allows
-- 100 MiB ends up exactly as it was.
ALTER TABLE pending_uploads DROP CONSTRAINT IF EXISTS pending_uploads_size_bytes_check;
ALTER TABLE pending_uploads ADD CONSTRAINT pending_uploads_size_bytes_check
    CHECK (size_bytes > 0 AND size_bytes <= 104857600);

ALTER TABLE presigned_uploads DROP CONSTRAINT IF EXISTS presigned_uploads_size_bytes_check;
ALTER TABLE presigned_uploads ADD CONSTRAINT presigned_uploads_size_bytes_check
    CHECK (size_bytes > 0 AND size_bytes <= 104857600);
