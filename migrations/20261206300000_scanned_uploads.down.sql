DROP TABLE IF EXISTS scanned_uploads;
