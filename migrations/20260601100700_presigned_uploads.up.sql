-- What a presign promised: the name, type and exact size a client declared
-- for an object it will PUT straight into the bucket. The commit checks
-- the object against this row and consumes it in the same transaction as
-- the pending_uploads insert, so an upload ID commits at most once. Rows
-- past expires_at are swept; their staging objects are removed by the
-- bucket's lifecycle rule.
CREATE TABLE IF NOT EXISTS presigned_uploads (
    upload_id    uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    filename     text NOT NULL CHECK (length(filename) > 0 AND length(filename) <= 100),
    mimetype     text NOT NULL DEFAULT '',
    size_bytes   bigint NOT NULL CHECK (size_bytes > 0 AND size_bytes <= 26214400),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS idx_presigned_uploads_expires ON presigned_uploads (expires_at);
