-- Before a migration: the relation locks on one table, for GET /api/v1/preflight. Run by the
-- target's poller during a poll, only when a request waits (never on the scrape path). One row a
-- lock on the table, granted or waited for (fast-path ones included: pg_locks shows them), and one
-- row with NULL lock columns when nobody holds or waits for any, or (relid NULL too) when the table
-- does not exist. {schema} (NULL: the first visible table of that name on the session's search_path),
-- {name} and {role} are quoted literals. Reading pg_locks costs what the inventory's read costs:
-- once per request, and requests are bounded per poll (PreflightDesk).
-- {waitstart}: pg_locks.waitstart on 14+, NULL on 12/13.
-- A prepared transaction's locks have no pid; its gid is found by its virtual transaction, which
-- pg_locks writes "-1/<xid>" for one. A holder that is not a client backend (an autovacuum worker
-- on the table: the poll reads only clients) comes with its backend_type and state, and an
-- autovacuum worker with its query (whether it runs "to prevent wraparound" decides its verdict).
SELECT c.oid::int8 AS relid,
       n.nspname || '.' || c.relname AS relation,
       d.oid::int8 AS datid,
       d.datname,
       (SELECT r.oid FROM pg_roles r WHERE r.rolname = {role})::int8 AS roleid,
       l.pid,
       l.mode,
       l.granted,
       {waitstart} AS waitstart,
       p.gid,
       a.backend_type,
       a.state,
       date_part('epoch', a.state_change) AS state_change,
       CASE WHEN a.backend_type = 'autovacuum worker' THEN a.query END AS activity_query
FROM pg_database d
LEFT JOIN (pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace)
       ON c.relname = {name}
      AND c.relkind IN ('r', 'p', 'm', 'f', 'v')
      AND CASE WHEN {schema}::text IS NULL THEN pg_table_is_visible(c.oid)
               ELSE n.nspname = {schema} END
LEFT JOIN pg_locks l ON l.locktype = 'relation'
                    AND l.database = d.oid
                    AND l.relation = c.oid
LEFT JOIN pg_prepared_xacts p ON l.pid IS NULL
                             AND l.virtualtransaction = '-1/' || p.transaction::text
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE d.datname = current_database()
