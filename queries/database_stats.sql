-- Session end counters (PostgreSQL 14+): which kind of end explains a lost lock; and the
-- deadlocks the server detected.
-- Templates and databases that refuse connections are left out: no session can end there.
-- stats_snapshot: on 14, when the stats collector wrote the file these counters come from (a
-- backend accepts one up to 500 ms old); NULL on 15+, whose counters are current.
SELECT s.datid, s.datname, s.sessions_fatal, s.sessions_killed, s.sessions_abandoned, s.deadlocks,
       date_part('epoch', pg_stat_get_snapshot_timestamp()) AS stats_snapshot
FROM pg_stat_database s
JOIN pg_database d ON d.oid = s.datid
WHERE d.datallowconn AND NOT d.datistemplate
