-- The keys download links are signed with (internal/downloadlink), where
-- every function that mints or checks links already reaches: the
-- database. No secret is read at run time (issue 42), and a rotation is
-- one statement (pendingctl linkkey rotate, docs/operating.md). The
-- service reads the newest two rows (the current key and the one it
-- replaced, accepted for the links' overlap); a rotation deletes the
-- older ones, so the table holds two rows, a few at most. It is not a
-- workspace's data: it names no workspace, and anyone who can read it can
-- read every file already.
CREATE TABLE IF NOT EXISTS download_link_keys (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text NOT NULL CHECK (length(key) >= 32 AND length(key) <= 256),
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE download_link_keys IS 'created by pendinguploads';

-- The first key: 64 hex digits from two random UUIDs, 244 random bits.
-- gen_random_uuid() draws from pg_strong_random() (the operating
-- system's CSPRNG, or OpenSSL's), in core Postgres since 13, and in
-- pgcrypto before it (the platform's database has both).
INSERT INTO download_link_keys (key)
SELECT replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')
WHERE NOT EXISTS (SELECT 1 FROM download_link_keys);
