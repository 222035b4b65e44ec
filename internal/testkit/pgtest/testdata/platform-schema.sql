-- The shape of the seed platform's own database, as far as pendinguploads
-- meets it: the tables its Go server created before this service existed.
-- Deployed beside the platform, the service runs on THIS database: the
-- platform's /activity feed (how its workspaces discover uploads) reads
-- the activity rows we write, and its workspace tokens are the tokens we
-- check. Load it into an empty database to test that deployment:
--   psql "$URL" -v ON_ERROR_STOP=1 -f internal/testkit/pgtest/testdata/platform-schema.sql
-- Written from the platform's column names, types and constraints; the
-- platform's other tables and columns are left out.

CREATE EXTENSION IF NOT EXISTS pgcrypto;  -- gen_random_uuid() before PG 13

-- The platform's migration tracker: one row per applied file name. Not
-- golang-migrate's (version, dirty) table: never write to it, never read it.
CREATE TABLE schema_migrations (
    filename   text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO schema_migrations (filename) VALUES
    ('001_workspaces.sql'), ('009_activity_logs.sql'),
    ('020_workspace_auth_tokens.up.sql'), ('035_org_api_tokens.up.sql'),
    ('036_org_api_tokens_org_id.up.sql'), ('20260505100000_pending_uploads.up.sql'),
    ('20260505200000_pending_uploads_acked_index.up.sql'),
    ('20260617130000_org_api_tokens_expires_at.up.sql');

-- Workspaces form trees: an org's root workspace has no parent, every
-- other workspace of the org hangs below it through parent_id.
CREATE TABLE workspaces (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text NOT NULL,
    parent_id  uuid REFERENCES workspaces(id),
    status     text DEFAULT 'provisioning',
    created_at timestamptz DEFAULT now(),
    updated_at timestamptz DEFAULT now()
);
CREATE INDEX idx_workspaces_parent_id ON workspaces (parent_id);

-- Every activity row names an existing workspace (foreign key): a row for
-- an unknown workspace is refused with SQLSTATE 23503.
CREATE TABLE activity_logs (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id    uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    activity_type   text NOT NULL,
    source_id       uuid,
    target_id       uuid,
    method          text,
    summary         text,
    request_body    jsonb,
    response_body   jsonb,
    duration_ms     integer,
    status          text DEFAULT 'ok',
    error_detail    text,
    created_at      timestamptz DEFAULT now(),
    idempotency_key text,
    tool_trace      jsonb
);
CREATE INDEX idx_activity_ws_type_time ON activity_logs (workspace_id, activity_type, created_at DESC);
CREATE UNIQUE INDEX activity_logs_idempotency_uniq ON activity_logs (workspace_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Workspace tokens as the platform mints them: base64url of 32 random
-- bytes (43 characters, no fixed prefix); only sha256(token) is kept.
-- Note the uuid id.
CREATE TABLE workspace_auth_tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    token_hash   bytea NOT NULL UNIQUE,
    prefix       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX workspace_auth_tokens_live_idx ON workspace_auth_tokens (workspace_id) WHERE revoked_at IS NULL;

-- Org API tokens: minted by a person in the canvas for CLIs and
-- integrations; one token acts on EVERY workspace of its org. Only
-- sha256(token) is kept (32 raw bytes). A live token: revoked_at IS NULL
-- and (expires_at IS NULL OR expires_at > now()). org_id anchors the token
-- to its org: NULL (older tokens) means unanchored; otherwise it names a
-- workspace of the org (usually its root) and the token is refused for a
-- workspace whose org root (follow parent_id up to the row whose parent_id
-- IS NULL) differs from the anchor's org root. org_id may also hold the
-- control plane's org UUID: then the org root workspace's id is the UUID
-- v5 (SHA-1, RFC 4122 URL namespace) of "molecule-platform-agent:" + that
-- org UUID.
CREATE TABLE org_api_tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    token_hash   bytea NOT NULL UNIQUE,
    prefix       text NOT NULL,
    name         text,
    created_by   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    org_id       uuid REFERENCES workspaces(id) ON DELETE SET NULL,
    expires_at   timestamptz
);
CREATE INDEX org_api_tokens_live_idx ON org_api_tokens (token_hash) WHERE revoked_at IS NULL;
CREATE INDEX org_api_tokens_org_id_idx ON org_api_tokens (org_id) WHERE org_id IS NOT NULL;

-- The seed's pending_uploads table, exactly as the seed migration makes it
-- (the seed migration, migrations/20260505100000_pending_uploads.up.sql), with the platform's later
-- acked index. No sha256, no s3_key: rows the platform's own server
-- staged look like this.
CREATE TABLE pending_uploads (
    file_id      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL,
    content      bytea NOT NULL,
    size_bytes   bigint NOT NULL CHECK (size_bytes > 0 AND size_bytes <= 26214400),
    filename     text NOT NULL CHECK (length(filename) > 0 AND length(filename) <= 100),
    mimetype     text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    fetched_at   timestamptz,
    acked_at     timestamptz,
    expires_at   timestamptz NOT NULL DEFAULT (now() + interval '24 hours')
);
CREATE INDEX idx_pending_uploads_workspace_unacked ON pending_uploads (workspace_id, created_at) WHERE acked_at IS NULL;
CREATE INDEX idx_pending_uploads_expires ON pending_uploads (expires_at) WHERE acked_at IS NULL;
CREATE INDEX idx_pending_uploads_acked ON pending_uploads (acked_at) WHERE acked_at IS NOT NULL;

-- The platform later raised its per-file cap to 100 MiB: it dropped the
-- CHECK above (its default name, pending_uploads_size_bytes_check) and
-- added one with the same name and `size_bytes <= 104857600`. A database
-- of either age must work.
