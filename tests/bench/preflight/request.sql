SELECT c.oid::int8 AS relid,
       n.nspname || '.' || c.relname AS relation,
       d.oid::int8 AS datid,
       d.datname,
       (SELECT r.oid FROM pg_roles r WHERE r.rolname = 'postgres')::int8 AS roleid,
       l.pid,
       l.mode,
       l.granted,
       date_part('epoch', l.waitstart) AS waitstart,
       p.gid,
       a.backend_type,
       a.state,
       date_part('epoch', a.state_change) AS state_change,
       CASE WHEN a.backend_type = 'autovacuum worker' THEN a.query END AS activity_query
FROM pg_database d
LEFT JOIN (pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace)
       ON c.relname = 'pg_class'
      AND c.relkind IN ('r', 'p', 'm', 'f', 'v')
      AND CASE WHEN 'pg_catalog'::text IS NULL THEN pg_table_is_visible(c.oid)
               ELSE n.nspname = 'pg_catalog' END
LEFT JOIN pg_locks l ON l.locktype = 'relation'
                    AND l.database = d.oid
                    AND l.relation = c.oid
LEFT JOIN pg_prepared_xacts p ON l.pid IS NULL
                             AND l.virtualtransaction = '-1/' || p.transaction::text
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE d.datname = current_database()
