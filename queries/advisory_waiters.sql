-- The cheap tier of a poll: only the advisory locks of sessions that are waiting on a lock right
-- now. pg_locks is still materialised by the server, but only waiters' rows are returned and the
-- query is skipped entirely when nobody waits (see exporter/collect/advisory.cc).
SELECT l.pid,
       l.database,
       l.classid,
       l.objid,
       l.objsubid,
       l.mode = 'ExclusiveLock' AS exclusive,
       l.granted,
       extract(epoch FROM l.waitstart)::float8 AS waitstart
FROM pg_locks l
WHERE l.locktype = 'advisory'
  AND NOT l.granted
  AND l.pid <> pg_backend_pid()
