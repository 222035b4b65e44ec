-- Back to 25 MiB; refused (the ADD fails) while a larger row exists.
ALTER TABLE presigned_uploads DROP CONSTRAINT IF EXISTS presigned_uploads_size_bytes_check;
ALTER TABLE presigned_uploads ADD CONSTRAINT presigned_uploads_size_bytes_check
    CHECK (size_bytes > 0 AND size_bytes <= 26214400);

ALTER TABLE pending_uploads DROP CONSTRAINT IF EXISTS pending_uploads_size_bytes_check;
ALTER TABLE pending_uploads ADD CONSTRAINT pending_uploads_size_bytes_check
    CHECK (size_bytes > 0 AND size_bytes <= 26214400);
