-- Who else can take part in a lock wait besides the client sessions the activity statement reads:
-- background processes (autovacuum, parallel workers, logical replication, ...) with their
-- backend_type, and prepared transactions, which hold locks with no backend at all
-- (pg_blocking_pids() reports them as pid 0). Neither reads pg_locks; both are read only when some
-- backend waits on a lock (the same uncorrelated gate). {leader_pid}: pg_stat_activity.leader_pid
-- on 13+, NULL on 12.
SELECT a.pid,
       {leader_pid} AS leader_pid,
       a.backend_type,
       a.datname,
       a.usename,
       a.application_name,
       host(a.client_addr) AS client_addr,
       a.state,
       extract(epoch FROM coalesce(a.state_change, a.xact_start, a.backend_start))::float8 AS since,
       a.wait_event_type IS NOT DISTINCT FROM 'Lock' AS waiting,
       CASE WHEN a.wait_event_type = 'Lock'
            THEN array_to_string(pg_blocking_pids(a.pid), ',') END AS blocked_by,
       NULL::text AS gid,
       NULL::text AS xid
FROM pg_stat_activity a
WHERE a.backend_type <> 'client backend'
  AND a.pid <> pg_backend_pid()
  AND EXISTS (SELECT 1 FROM pg_stat_activity w
              WHERE w.wait_event_type = 'Lock' AND w.pid <> pg_backend_pid())
UNION ALL
SELECT 0,
       NULL::int,
       'prepared transaction',
       p.database,
       p.owner,
       '',
       NULL::text,
       'prepared',
       extract(epoch FROM p.prepared)::float8,
       false,
       NULL::text,
       p.gid,
       p.transaction::text
FROM pg_prepared_xacts p
WHERE EXISTS (SELECT 1 FROM pg_stat_activity w
              WHERE w.wait_event_type = 'Lock' AND w.pid <> pg_backend_pid())
