ALTER TABLE presigned_uploads
    DROP COLUMN IF EXISTS part_sha256,
    DROP COLUMN IF EXISTS s3_upload_id,
    DROP COLUMN IF EXISTS part_bytes;
