-- The same with every key listed (the inventory's int8[] of keys).
SELECT l.pid,
       count(*) AS entries,
       array_agg((l.classid::int8 << 32) | l.objid::int8) FILTER (WHERE l.objid IS NOT NULL) AS keys
FROM pg_locks l
WHERE NOT l.fastpath
GROUP BY 1
