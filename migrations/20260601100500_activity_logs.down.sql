DO $$
BEGIN
    IF obj_description(to_regclass('activity_logs'), 'pg_class') = 'created by pendinguploads' THEN
        DROP TABLE activity_logs;
    END IF;
END $$;
