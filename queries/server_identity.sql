-- Once per connection: which PostgreSQL server this is, to notice two targets polling the same
-- one (exporter/poll/server_identity.h). A replica shares its primary's system_identifier (and
-- often its port and data directory): pg_postmaster_start_time() tells them apart. The port is the
-- server's setting, known over a Unix socket too (inet_server_port() is NULL there).
-- data_directory (for the log only) is NULL unless the role may read it (pg_read_all_settings).
SELECT (SELECT system_identifier FROM pg_control_system())::text AS system_identifier,
       current_setting('port') AS port,
       (SELECT setting FROM pg_settings WHERE name = 'data_directory') AS data_directory,
       extract(epoch FROM pg_postmaster_start_time())::text AS started
