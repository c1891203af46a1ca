-- Session end counters (PostgreSQL 14+): which kind of end explains a lost lock.
SELECT datid, datname, sessions_fatal, sessions_killed, sessions_abandoned
FROM pg_stat_database
WHERE datid <> 0
