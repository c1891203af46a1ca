-- Client backends other than the exporter's own. Without pg_monitor another role's backend_type,
-- state and timings read as NULL: such rows are kept (and counted as hidden) when they belong to
-- a role, so a missing privilege is visible instead of silently shrinking every metric. pg_blocking_pids() is evaluated only for sessions
-- that wait on a lock: it takes the lock manager's partition locks, so it must not run per row.
-- The function rather than the pg_stat_activity view, and the user name from the catalog cache
-- (pg_get_userbyid): the view joins the shared catalog pg_authid, whose locks never take a
-- backend's fast path, so every poll would take entries of the server's shared lock table for it
-- and its two indexes (docs/lock-table.md).
-- The query column is left(a.query, 1024) with web.show_query_text = true, else NULL: query texts can hold
-- secrets and are read only when the on-call page is allowed to show them. backend_xid (the
-- top-level transaction id) tells the holders of row locks in the polls that skip pg_locks.
-- Times as date_part('epoch', ...), a float8: extract() computes a numeric since PostgreSQL 14,
-- and its cast to float8 gives the same value at several times the cost (a fifth of this
-- statement's at 55 sessions). The queries of the exporter use it throughout.
-- The database names are joined below a fence (OFFSET 0), before the filter: the planner then
-- expects every backend rather than the one row it guesses the filter leaves, and hashes
-- pg_database once instead of scanning it again for every session (a nested loop, 40% of the
-- statement's cost at 55 sessions, and sessions x databases rows read on a server with many).
SELECT a.pid,
       a.datid,
       a.datname,
       a.usesysid,
       pg_get_userbyid(a.usesysid) AS usename,
       a.application_name,
       host(a.client_addr) AS client_addr,
       a.state,
       date_part('epoch', a.backend_start) AS backend_start,
       date_part('epoch', a.xact_start) AS xact_start,
       date_part('epoch', a.state_change) AS state_change,
       date_part('epoch', a.query_start) AS query_start,
       a.wait_event_type IS NOT DISTINCT FROM 'Lock' AS waiting,
       a.wait_event_type IS NOT DISTINCT FROM 'Lock' AND a.wait_event = 'advisory' AS advisory_wait,
       CASE WHEN a.wait_event_type = 'Lock'
            THEN array_to_string(pg_blocking_pids(a.pid), ',') END AS blocked_by,
       {query} AS query,
       a.backend_xid::text AS backend_xid
FROM (SELECT s.*, d.datname
      FROM pg_stat_get_activity(NULL) s
      LEFT JOIN pg_database d ON d.oid = s.datid
      OFFSET 0) a
WHERE (a.backend_type = 'client backend' OR (a.backend_type IS NULL AND a.usesysid IS NOT NULL))
  AND a.pid <> pg_backend_pid()
