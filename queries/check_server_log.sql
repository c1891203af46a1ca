-- --check-targets, per target with a [targets.server_log]: the settings that decide what the
-- server writes to its log. A setting the role may not see (log_directory and data_directory need
-- pg_read_all_settings, which pg_monitor includes) is NULL rather than an error.
SELECT current_setting('server_version_num')::int AS version_num,
       (SELECT current_setting(name) FROM pg_settings WHERE name = 'logging_collector')
         AS logging_collector,
       (SELECT current_setting(name) FROM pg_settings WHERE name = 'log_destination')
         AS log_destination,
       (SELECT current_setting(name) FROM pg_settings WHERE name = 'log_directory')
         AS log_directory,
       (SELECT current_setting(name) FROM pg_settings WHERE name = 'data_directory')
         AS data_directory,
       (SELECT current_setting(name) FROM pg_settings WHERE name = 'log_disconnections')
         AS log_disconnections,
       (SELECT current_setting(name) FROM pg_settings WHERE name = 'log_lock_waits')
         AS log_lock_waits,
       (SELECT current_setting(name) FROM pg_settings WHERE name = 'deadlock_timeout')
         AS deadlock_timeout,
       (SELECT current_setting(name) FROM pg_settings WHERE name = 'lc_messages') AS lc_messages
