-- The quota's count and the list's page are Index Only Scans
-- (20261206100000): they skip the table only for rows on pages the
-- visibility map marks all-visible, which only VACUUM does. Pending rows
-- are recent by nature, and by default autovacuum visits a table after
-- inserts of 20% of its size (a million rows at 5M): until then every
-- pending row is a table read again (10,000 heap fetches at 10,000
-- pending). Vacuumed after every 10,000 inserted or changed rows instead,
-- whatever the table's size, the rows not yet all-visible are those of the
-- last few minutes. A VACUUM of rows only inserted reads only the pages
-- not yet all-visible.
--
-- ALTER TABLE ... SET (storage parameters) takes a SHARE UPDATE EXCLUSIVE
-- lock for an instant: reads and writes go on (docs/deploy.md).
ALTER TABLE pending_uploads SET (
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_scale_factor = 0
);
