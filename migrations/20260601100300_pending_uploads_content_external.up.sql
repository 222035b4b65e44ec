-- Uploaded files are mostly compressed already (images, PDFs, archives):
-- keep them out of line but do not let Postgres try to compress them again.
ALTER TABLE pending_uploads ALTER COLUMN content SET STORAGE EXTERNAL;
