-- Platforms whose workspaces poll an activity_logs table already have one;
-- create it only where it is absent, and mark it as ours so the down
-- migration never drops a table this project did not create.
DO $$
BEGIN
    IF to_regclass('activity_logs') IS NULL THEN
        CREATE TABLE activity_logs (
            id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            workspace_id  uuid NOT NULL,
            activity_type text NOT NULL,
            source_id     uuid,
            target_id     uuid,
            method        text,
            summary       text,
            request_body  jsonb,
            response_body jsonb,
            duration_ms   integer,
            status        text NOT NULL DEFAULT 'ok',
            error_detail  text,
            created_at    timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX idx_activity_logs_workspace_created
            ON activity_logs (workspace_id, created_at);
        COMMENT ON TABLE activity_logs IS 'created by pendinguploads';
    END IF;
END $$;
