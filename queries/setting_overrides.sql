-- Per-database, per-role and per-database-and-role values (ALTER ROLE/DATABASE ... SET) of the same
-- timeouts, as written by the administrator ("3500ms", "1min", "2000"): normalised by the exporter.
-- Role names from the catalog cache (pg_get_userbyid), not pg_roles: reading the shared catalog
-- pg_authid would take entries of the server's shared lock table at every poll.
SELECT s.setdatabase AS datid,
       s.setrole AS roleid,
       COALESCE(d.datname, '*') AS database,
       CASE WHEN s.setrole = 0 THEN '*' ELSE pg_get_userbyid(s.setrole) END AS role,
       split_part(c.cfg, '=', 1) AS name,
       substr(c.cfg, strpos(c.cfg, '=') + 1) AS value
FROM pg_db_role_setting s
LEFT JOIN pg_database d ON d.oid = s.setdatabase
CROSS JOIN LATERAL unnest(s.setconfig) AS c(cfg)
WHERE split_part(c.cfg, '=', 1) IN ('idle_in_transaction_session_timeout', 'idle_session_timeout',
                                    'lock_timeout', 'statement_timeout', 'deadlock_timeout',
                                    'tcp_keepalives_idle', 'tcp_keepalives_interval')
