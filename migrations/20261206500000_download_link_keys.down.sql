DROP TABLE IF EXISTS download_link_keys;
