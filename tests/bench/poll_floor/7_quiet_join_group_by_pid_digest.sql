-- The quiet holders' look-up joined (one pg_stat_get_activity(pid) per holder in {holders}),
-- grouped by holder, counted and summed: the quiet path's lower bound.
SELECT l.pid, count(*) AS entries, sum((l.classid::int8 << 32) | l.objid::int8) AS digest
FROM pg_locks l
LEFT JOIN (SELECT s.pid
           FROM unnest({holders}) k(pid), LATERAL pg_stat_get_activity(k.pid) s
           WHERE s.state = 'idle') q
  ON q.pid = l.pid
WHERE NOT l.fastpath
GROUP BY 1
