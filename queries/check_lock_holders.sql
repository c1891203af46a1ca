-- --check-targets: the sessions that hold one advisory key now, in any database of the server.
-- $1 classid, $2 objid, $3 objsubid as pg_locks shows them. A prepared transaction has no pid.
SELECT l.pid, d.datname, a.application_name
FROM pg_locks l
LEFT JOIN pg_database d ON d.oid = l.database
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted
  AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid = $3::int2
ORDER BY l.pid
