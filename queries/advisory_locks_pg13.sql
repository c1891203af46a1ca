-- PostgreSQL 12 and 13 have no pg_locks.waitstart: the wait falls back to query_start.
SELECT l.pid,
       l.database,
       l.classid,
       l.objid,
       l.objsubid,
       l.mode = 'ExclusiveLock' AS exclusive,
       l.granted,
       NULL::float8 AS waitstart
FROM pg_locks l
WHERE l.locktype = 'advisory'
  AND l.pid IS NOT NULL
  AND l.pid <> pg_backend_pid()
