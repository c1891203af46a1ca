-- The parties to lock waits that the activity statement does not read, in one statement of two
-- parts, each behind the same kind of gate: an uncorrelated EXISTS on the poll's
-- pg_stat_activity snapshot that the server evaluates once. While nobody waits on a lock nothing
-- else is read (EXPLAIN: "never executed"). The gate reads one field per backend
-- (pg_stat_get_backend_wait_event_type()): pg_stat_get_activity() builds a row of 30 columns per
-- backend, which made the statement cost twice as much at 55 sessions with nobody waiting. The
-- pending requests themselves come from the poll's one read of pg_locks, the advisory statement
-- (queries/advisory_locks.sql). Prepared once per connection; functions rather than the catalog
-- views keep its plan small.
--   backend:  processes that are not client backends (autovacuum, parallel workers, replication
--             workers, ...): they can block or wait, and the activity statement reads clients only.
--             An autovacuum worker's query says whether it runs "(to prevent wraparound)".
--   prepared: prepared transactions, which hold locks with no backend (pg_blocking_pids() reports
--             them as pid 0).
-- {leader_pid}: 13+, NULL on 12.
SELECT 'backend' AS kind,
       a.pid,
       {leader_pid} AS leader_pid,
       a.backend_type,
       a.datid,
       pg_get_userbyid(a.usesysid) AS usename,
       a.application_name,
       host(a.client_addr) AS client_addr,
       a.state,
       date_part('epoch', coalesce(a.state_change, a.xact_start, a.backend_start)) AS since,
       a.wait_event_type IS NOT DISTINCT FROM 'Lock' AS waiting,
       CASE WHEN a.wait_event_type = 'Lock'
            THEN array_to_string(pg_blocking_pids(a.pid), ',') END AS blocked_by,
       NULL::text AS gid,
       NULL::text AS xid,
       CASE WHEN a.backend_type = 'autovacuum worker' THEN left(a.query, 200) END AS query
FROM pg_stat_get_activity(NULL) a
WHERE a.backend_type <> 'client backend'
  AND a.pid <> pg_backend_pid()
  AND EXISTS (SELECT 1
              FROM pg_stat_get_backend_idset() b
              WHERE pg_stat_get_backend_wait_event_type(b) = 'Lock'
                AND pg_stat_get_backend_pid(b) <> pg_backend_pid())
UNION ALL
SELECT 'prepared',
       0,
       NULL,
       'prepared transaction',
       p.dbid,
       pg_get_userbyid(p.ownerid),
       '',
       NULL,
       'prepared',
       date_part('epoch', p.prepared),
       false,
       NULL,
       p.gid,
       p.transaction::text,
       NULL
FROM pg_prepared_xact() p
WHERE EXISTS (SELECT 1
              FROM pg_stat_get_backend_idset() b
              WHERE pg_stat_get_backend_wait_event_type(b) = 'Lock'
                AND pg_stat_get_backend_pid(b) <> pg_backend_pid())
