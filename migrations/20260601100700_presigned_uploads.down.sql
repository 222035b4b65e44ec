DROP TABLE IF EXISTS presigned_uploads;
