-- Advisory locks only, filtered inside the server so only they cross the wire. Reading pg_locks
-- holds every lock-manager partition lock for the read: once per poll at most. The collector fills
-- in the waitstart column: pg_locks.waitstart on 14+, NULL on 12/13 (no such column there).
SELECT l.pid,
       l.database,
       l.classid,
       l.objid,
       l.objsubid,
       l.mode = 'ExclusiveLock' AS exclusive,
       l.granted,
       {waitstart} AS waitstart
FROM pg_locks l
WHERE l.locktype = 'advisory'
  AND l.pid IS NOT NULL
  AND l.pid <> pg_backend_pid()
