ALTER TABLE presigned_uploads DROP COLUMN IF EXISTS file_id;
