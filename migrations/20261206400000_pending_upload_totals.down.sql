DROP TABLE IF EXISTS pending_upload_totals;
