-- Every lock request not granted yet, except advisory ones (the advisory statement of this poll
-- reads those), with what on-call needs: type, mode, the relation and the object waited for.
-- The uncorrelated EXISTS is a gate the server evaluates once, before reading pg_locks: when no
-- backend waits on a non-advisory lock, pg_locks is not read at all (EXPLAIN: "never executed").
-- It reads the same pg_stat_activity snapshot as the rest of this poll.
-- relation: schema.table where the OID can be resolved here (a relation of the polled database,
-- or a shared catalog), else the OID: an OID of another database means nothing in this one.
-- locktag: equal for requests on the same object, so a blocker queued for the same object can
-- be told from one that holds it. {waitstart}: pg_locks.waitstart on 14+, NULL on 12/13.
SELECT l.pid,
       l.locktype,
       l.mode,
       l.database,
       coalesce(n.nspname || '.' || c.relname, l.relation::text, '') AS relation,
       l.transactionid::text AS transactionid,
       concat_ws(':', l.locktype, l.database, l.relation, l.page, l.tuple, l.virtualxid,
                 l.transactionid, l.classid, l.objid, l.objsubid) AS locktag,
       {waitstart} AS waitstart
FROM pg_locks l
LEFT JOIN pg_class c
       ON c.oid = l.relation
      AND (l.database = 0
           OR l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()))
LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT l.granted
  AND l.locktype <> 'advisory'
  AND l.pid <> pg_backend_pid()
  AND EXISTS (SELECT 1
              FROM pg_stat_activity a
              WHERE a.wait_event_type = 'Lock'
                AND a.wait_event <> 'advisory'
                AND a.pid <> pg_backend_pid())
