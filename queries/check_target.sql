-- --check-targets: who the exporter is on a target's server, once per session.
SELECT quote_ident(current_user) AS role,
       current_database() AS database,
       current_setting('server_version') AS version
