-- Every lock outside the fast path counted: the filter alone.
SELECT count(*) FROM pg_locks l WHERE NOT l.fastpath
