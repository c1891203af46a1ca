-- Only after a poll failed with out of shared memory (SQLSTATE 53200): the shared lock table's
-- entries by process and lock type, with the identity the sessions show without a catalog. It
-- must need no entry of the full table: no catalog is read (the poll's pg_stat_activity view
-- joins the shared catalogs pg_database and pg_authid, whose locks never take the fast path),
-- and the one relation it locks, the pg_locks view of this database, takes a fast-path slot.
-- pid 0: prepared transactions. The grouping is done here: the table can hold many thousands.
SELECT coalesce(l.pid, 0) AS pid,
       l.locktype,
       count(*) AS entries,
       a.datid,
       a.application_name,
       host(a.client_addr) AS client_addr,
       a.state
FROM pg_locks l
LEFT JOIN pg_stat_get_activity(NULL) a ON a.pid = l.pid
WHERE NOT l.fastpath
GROUP BY 1, 2, 4, 5, 6, 7
