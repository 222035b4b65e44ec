-- Workspace bearer tokens. Only the SHA-256 of a token is kept; the token
-- itself is shown once, when it is created. prefix (the first characters)
-- lets an operator tell tokens apart in a listing without revealing them.
CREATE TABLE IF NOT EXISTS workspace_auth_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash   bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    workspace_id uuid NOT NULL,
    prefix       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE INDEX IF NOT EXISTS idx_workspace_auth_tokens_workspace
    ON workspace_auth_tokens (workspace_id);
