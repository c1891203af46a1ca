-- Every lock outside the fast path grouped by its holder alone (hashed), counted.
SELECT l.pid, count(*) FROM pg_locks l WHERE NOT l.fastpath GROUP BY 1
