-- The sessions idle outside any transaction right after the poll's read of pg_locks, with the
-- state_change of that idle spell. Runs last in the poll's batch: every other statement of the
-- batch reads the one pg_stat_activity snapshot taken before pg_locks, this one clears it and reads
-- afresh. The clearing is the argument of pg_stat_get_activity (an init plan), so the server runs
-- it before the function reads the sessions; NULL, its value, asks for every session. A session idle with the same state_change in both reads was
-- idle throughout the pg_locks read in between (any statement it ran would have moved
-- state_change): the advisory locks that read saw it hold were held outside a transaction, so
-- they are session locks. A transaction lock cannot pass this test: PostgreSQL reports a session
-- idle only after its transaction has ended and released its locks.
SELECT a.pid,
       date_part('epoch', a.state_change) AS state_change
FROM pg_stat_get_activity((SELECT NULL::int FROM pg_stat_clear_snapshot())) a
WHERE a.state = 'idle'
  AND a.pid <> pg_backend_pid()
