-- pg_locks with its columns read (up to fastpath) and nothing else done per row.
SELECT count(l.fastpath) FROM pg_locks l
