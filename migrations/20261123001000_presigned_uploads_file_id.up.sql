-- A presigned upload, once committed, remembers the file it became instead
-- of vanishing: a client that lost the commit's answer can commit again
-- and get the same file back, and a losing racer can be told which upload
-- was taken. NULL: not committed yet.
ALTER TABLE presigned_uploads ADD COLUMN IF NOT EXISTS file_id uuid;
