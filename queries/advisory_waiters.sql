-- The cheap tier of a poll: only the advisory locks of sessions that wait right now. The EXISTS
-- is uncorrelated, so the server evaluates it once, as a gate, before reading pg_locks: when
-- nobody waits on an advisory lock, pg_locks is not materialised at all. It reads the same
-- pg_stat_activity snapshot as the activity statement of this poll (one snapshot per transaction).
-- The waitstart column as in advisory_locks.sql.
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
  AND NOT l.granted
  AND l.pid <> pg_backend_pid()
  AND EXISTS (SELECT 1
              FROM pg_stat_activity a
              WHERE a.wait_event_type = 'Lock'
                AND a.wait_event = 'advisory'
                AND (a.backend_type = 'client backend'
                     OR (a.backend_type IS NULL AND a.usesysid IS NOT NULL))
                AND a.pid <> pg_backend_pid())
