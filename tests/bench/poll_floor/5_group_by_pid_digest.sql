-- Grouped by holder alone, counted, and the sum of the keys (a quiet holder's row, without the
-- look-up).
SELECT l.pid, count(*) AS entries, sum((l.classid::int8 << 32) | l.objid::int8) AS digest
FROM pg_locks l WHERE NOT l.fastpath GROUP BY 1
