-- --check-targets, for a named lock that no session holds now: the advisory keys of the same form
-- ($1: objsubid 1 for one bigint, 2 for two int4) held right now in any database, the most held
-- first, with their holders' applications. A recipe that derives another key than the
-- application's shows its lock here. total: how many such keys are held.
SELECT l.classid::int8 AS classid,
       l.objid::int8 AS objid,
       count(*) AS holders,
       string_agg(DISTINCT coalesce(a.application_name, ''), ', ') AS applications,
       count(*) OVER () AS total
FROM pg_locks l
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = $1::int2
  AND l.pid IS DISTINCT FROM pg_backend_pid()
GROUP BY l.classid, l.objid
ORDER BY count(*) DESC, l.classid, l.objid
LIMIT 5
