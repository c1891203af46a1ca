-- Advisory locks only, filtered inside the server so only they cross the wire (PostgreSQL 14+).
-- Reading pg_locks holds every lock-manager partition lock for the read: once per poll at most.
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
  AND l.pid IS NOT NULL
  AND l.pid <> pg_backend_pid()
