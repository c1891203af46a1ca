-- The same without the sum: what the join alone adds to grouping by holder.
SELECT l.pid, count(*) AS entries
FROM pg_locks l
LEFT JOIN (SELECT s.pid
           FROM unnest({holders}) k(pid), LATERAL pg_stat_get_activity(k.pid) s
           WHERE s.state = 'idle') q
  ON q.pid = l.pid
WHERE NOT l.fastpath
GROUP BY 1
