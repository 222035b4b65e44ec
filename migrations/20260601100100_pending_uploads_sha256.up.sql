-- SHA-256 of the content, computed once at staging time, so the workspace
-- can verify what it fetched (Content-Digest) without the server hashing
-- 25 MiB on every fetch. Nullable only for rows staged before this column.
ALTER TABLE pending_uploads
    ADD COLUMN IF NOT EXISTS sha256 bytea
    CONSTRAINT pending_uploads_sha256_len CHECK (sha256 IS NULL OR length(sha256) = 32);
