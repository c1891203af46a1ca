-- Lock waits of every type besides advisory ones (the advisory statement of this poll reads those),
-- in one statement of three parts, each behind the same kind of gate: an uncorrelated EXISTS on
-- the poll's pg_stat_activity snapshot that the server evaluates once. While nobody waits on a lock
-- nothing else is read: not pg_locks, not the prepared transactions (EXPLAIN: "never executed").
-- Functions rather than the catalog views keep planning, paid on every poll, small.
--   request:  the pending requests of pg_locks: type, mode, relation, the object (locktag: equal
--             for requests on one object, so a blocker queued for the same object can be told from
--             one that holds it). relation is schema.table where the OID can be resolved here (a
--             relation of the polled database or a shared catalog), else the OID: another
--             database's OID means nothing in this one.
--   backend:  processes that are not client backends (autovacuum, parallel workers, replication
--             workers, ...): they can block or wait, and the activity statement reads clients only.
--   prepared: prepared transactions, which hold locks with no backend (pg_blocking_pids() reports
--             them as pid 0).
-- {waitstart}: pg_locks.waitstart on 14+, NULL on 12/13. {leader_pid}: 13+, NULL on 12.
SELECT 'request' AS kind,
       l.pid,
       NULL::int AS leader_pid,
       NULL::text AS backend_type,
       l.database AS datid,
       NULL::text AS usename,
       NULL::text AS application_name,
       NULL::text AS client_addr,
       NULL::text AS state,
       NULL::float8 AS since,
       NULL::bool AS waiting,
       NULL::text AS blocked_by,
       NULL::text AS gid,
       NULL::text AS xid,
       l.locktype,
       l.mode,
       CASE WHEN l.relation IS NULL THEN ''
            WHEN l.database = 0
              OR l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
            THEN coalesce((SELECT (SELECT n.nspname FROM pg_namespace n WHERE n.oid = c.relnamespace)
                                  || '.' || c.relname
                           FROM pg_class c
                           WHERE c.oid = l.relation),
                          l.relation::text)
            ELSE l.relation::text END AS relation,
       l.transactionid::text AS transactionid,
       concat_ws(':', l.locktype, l.database, l.relation, l.page, l.tuple, l.virtualxid,
                 l.transactionid, l.classid, l.objid, l.objsubid) AS locktag,
       {waitstart} AS waitstart
FROM pg_lock_status() l
WHERE NOT l.granted
  AND l.locktype <> 'advisory'
  AND l.pid <> pg_backend_pid()
  AND EXISTS (SELECT 1
              FROM pg_stat_get_activity(NULL) a
              WHERE a.wait_event_type = 'Lock'
                AND a.wait_event <> 'advisory'
                AND a.pid <> pg_backend_pid())
UNION ALL
SELECT 'backend',
       a.pid,
       {leader_pid},
       a.backend_type,
       a.datid,
       pg_get_userbyid(a.usesysid),
       a.application_name,
       host(a.client_addr),
       a.state,
       extract(epoch FROM coalesce(a.state_change, a.xact_start, a.backend_start))::float8,
       a.wait_event_type IS NOT DISTINCT FROM 'Lock',
       CASE WHEN a.wait_event_type = 'Lock'
            THEN array_to_string(pg_blocking_pids(a.pid), ',') END,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM pg_stat_get_activity(NULL) a
WHERE a.backend_type <> 'client backend'
  AND a.pid <> pg_backend_pid()
  AND EXISTS (SELECT 1
              FROM pg_stat_get_activity(NULL) w
              WHERE w.wait_event_type = 'Lock' AND w.pid <> pg_backend_pid())
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
       extract(epoch FROM p.prepared)::float8,
       false,
       NULL,
       p.gid,
       p.transaction::text,
       NULL, NULL, NULL, NULL, NULL, NULL
FROM pg_prepared_xact() p
WHERE EXISTS (SELECT 1
              FROM pg_stat_get_activity(NULL) w
              WHERE w.wait_event_type = 'Lock' AND w.pid <> pg_backend_pid())
