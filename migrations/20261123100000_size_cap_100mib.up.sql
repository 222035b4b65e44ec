-- The per-file cap goes to 100 MiB (MAX_FILE_BYTES may be set up to it),
-- as the platform's own cap went. The CHECK keeps the name Postgres gave
-- the seed's column CHECK, pending_uploads_size_bytes_check, which is also
-- the platform's name for it. A table whose CHECK already allows 100 MiB
-- (the platform's, once it raised its cap) is left exactly as it is: no
-- lock, no scan of the platform's rows.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'pending_uploads'::regclass
                     AND conname = 'pending_uploads_size_bytes_check'
                     AND pg_get_constraintdef(oid) LIKE '%104857600%') THEN
        ALTER TABLE pending_uploads DROP CONSTRAINT IF EXISTS pending_uploads_size_bytes_check;
        ALTER TABLE pending_uploads ADD CONSTRAINT pending_uploads_size_bytes_check
            CHECK (size_bytes > 0 AND size_bytes <= 104857600);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'presigned_uploads'::regclass
                     AND conname = 'presigned_uploads_size_bytes_check'
                     AND pg_get_constraintdef(oid) LIKE '%104857600%') THEN
        ALTER TABLE presigned_uploads DROP CONSTRAINT IF EXISTS presigned_uploads_size_bytes_check;
        ALTER TABLE presigned_uploads ADD CONSTRAINT presigned_uploads_size_bytes_check
            CHECK (size_bytes > 0 AND size_bytes <= 104857600);
    END IF;
END $$;
