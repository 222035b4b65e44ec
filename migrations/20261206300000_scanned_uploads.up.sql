-- Files that wait for a malware scan's verdict before delivery (issue 44:
-- MalwareScanning=guardduty, the dev server's MALWARE_SCAN=clamav). A file
-- of a scanned deployment is staged here, not in pending_uploads: the
-- list, fetch, link and ack statements never see it, and no activity row
-- or push hint announces it. A clean verdict moves it into pending_uploads
-- in one transaction with its activity row (state 'clean'); an infected one
-- keeps its row here as the record of the refusal (state 'blocked', its
-- object deleted); a scan that could not decide, or never answered within
-- SCAN_TIMEOUT, is 'held' when the policy holds. The sender reads the state
-- (GET .../uploads/scan); the sweep deletes rows past expires_at.
CREATE TABLE IF NOT EXISTS scanned_uploads (
    file_id      uuid PRIMARY KEY,
    workspace_id uuid NOT NULL,
    -- Always in the bucket: GuardDuty scans objects, never rows.
    s3_key       text NOT NULL,
    size_bytes   bigint NOT NULL CHECK (size_bytes > 0),
    sha256       bytea NOT NULL,
    filename     text NOT NULL CHECK (length(filename) > 0 AND length(filename) <= 100),
    mimetype     text NOT NULL DEFAULT '',
    -- created_at and expires_at are the file's from staging: delivery
    -- copies them, so the 24 h expiry counts from staging.
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'clean', 'blocked', 'held')),
    -- GuardDuty's scanResultStatus that decided it (NO_THREATS_FOUND,
    -- THREATS_FOUND, UNSUPPORTED, ACCESS_DENIED, FAILED) or TIMEOUT.
    result       text CHECK (result IS NULL OR length(result) <= 32),
    -- What the scanner named (threat names), bounded; never the bytes.
    reason       text CHECK (reason IS NULL OR length(reason) <= 512),
    decided_at   timestamptz
);

-- The quota's count and the timeout's pass: what still waits, per
-- workspace and by age.
CREATE INDEX IF NOT EXISTS idx_scanned_uploads_waiting
    ON scanned_uploads (workspace_id, created_at)
    WHERE state IN ('pending', 'held');
-- The quota's counts (pendinguploads' waitingScanFiles, waitingScanBytes):
-- a workspace's waiting files keyed by expires_at, their sizes carried in
-- the index, an Index Only Scan over expires_at > now() as for
-- idx_pending_uploads_workspace_pending.
CREATE INDEX IF NOT EXISTS idx_scanned_uploads_workspace_waiting
    ON scanned_uploads (workspace_id, expires_at) INCLUDE (size_bytes)
    WHERE state IN ('pending', 'held');
CREATE INDEX IF NOT EXISTS idx_scanned_uploads_expires
    ON scanned_uploads (expires_at);
