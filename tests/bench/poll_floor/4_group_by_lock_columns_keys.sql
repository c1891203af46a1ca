-- The inventory's grouping (holder, database, key form, mode, granted) with its keys, without
-- the columns of pending requests (locktype, transactionid, waitstart, mode, relation, locktag).
SELECT l.pid,
       l.database,
       l.objsubid,
       l.mode = 'ExclusiveLock' AS exclusive,
       l.granted,
       count(*) AS entries,
       array_agg((l.classid::int8 << 32) | l.objid::int8) FILTER (WHERE l.objid IS NOT NULL) AS keys
FROM pg_locks l
WHERE NOT l.fastpath
GROUP BY 1, 2, 3, 4, 5
