DROP TABLE IF EXISTS pending_uploads;
