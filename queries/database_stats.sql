-- Session end counters (PostgreSQL 14+): which kind of end explains a lost lock.
-- Templates and databases that refuse connections are left out: no session can end there.
SELECT s.datid, s.datname, s.sessions_fatal, s.sessions_killed, s.sessions_abandoned
FROM pg_stat_database s
JOIN pg_database d ON d.oid = s.datid
WHERE d.datallowconn AND NOT d.datistemplate
