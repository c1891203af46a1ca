-- The quiet holders of an inventory (queries/advisory_locks.sql, quiet_join): of the sessions
-- passed, $1 their pids and $2 the state_change of the idle spell they were in across the last
-- inventory's read of pg_locks, those still idle in that same spell in the poll's snapshot of
-- pg_stat_activity. pg_stat_get_activity(pid) builds the row of that one session, not of every
-- session; a session gone, or not visible to the exporter's role, is not quiet.
LEFT JOIN (SELECT k.pid
           FROM unnest($1::int4[], $2::float8[]) k(pid, state_change),
                LATERAL pg_stat_get_activity(k.pid) s
           WHERE s.state = 'idle'
             AND date_part('epoch', s.state_change) = k.state_change) q
  ON q.pid = l.pid
