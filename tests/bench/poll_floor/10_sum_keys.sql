-- Every key summed, nothing grouped.
SELECT count(*), sum((l.classid::int8 << 32) | l.objid::int8) FROM pg_locks l WHERE NOT l.fastpath
