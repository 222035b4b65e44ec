-- The staging table for chat uploads bound for workspaces that cannot be
-- called back. One row per file; the workspace polls, fetches, acks; the
-- sweep deletes what is acked (after a retention window) or expired.
--
-- No foreign key to a workspaces table: rows are evidence of receipt and
-- expire on their own TTL, whatever happens to the workspace.
CREATE TABLE IF NOT EXISTS pending_uploads (
    -- Server-chosen, so the uploader can quote the URI right away.
    file_id      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Target workspace (not a foreign key, see above).
    workspace_id uuid NOT NULL,
    -- The bytes, inline. A later migration lets S3 hold them instead.
    -- The CHECK pins the same 25 MiB cap the workspace enforces on ingest,
    -- so the platform never accepts a file the workspace would refuse.
    content      bytea NOT NULL,
    size_bytes   bigint NOT NULL CHECK (size_bytes > 0 AND size_bytes <= 26214400),
    -- Sanitized at write time; the 100-character cap matches the
    -- workspace-side sanitizer.
    filename     text NOT NULL CHECK (length(filename) > 0 AND length(filename) <= 100),
    mimetype     text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- Stamped on every fetch: tells "fetched but never acked" apart from
    -- "never fetched" (workspace offline).
    fetched_at   timestamptz,
    -- Stamped on the first ack: the happy path's terminal state.
    acked_at     timestamptz,
    -- Hard TTL, regardless of fetches: created_at + 24h, not acked_at + 24h,
    -- so a row that is fetched and never acked cannot live forever.
    expires_at   timestamptz NOT NULL DEFAULT (now() + interval '24 hours')
);

-- The poll: one workspace's unacked rows, oldest first. Partial, because
-- acked rows are on their way out and should not bloat the working set.
CREATE INDEX IF NOT EXISTS idx_pending_uploads_workspace_unacked
    ON pending_uploads (workspace_id, created_at)
    WHERE acked_at IS NULL;

-- The sweep's expiry pass: unacked rows past expires_at. Acked rows go by
-- their own (shorter) retention, through a separate index.
CREATE INDEX IF NOT EXISTS idx_pending_uploads_expires
    ON pending_uploads (expires_at)
    WHERE acked_at IS NULL;
