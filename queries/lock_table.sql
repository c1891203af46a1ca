-- Every poll: the settings that size the server's shared lock table, and the backends waiting on
-- the lock manager's own LWLock (a lock-manager partition: fast-path exhaustion, many sessions
-- taking and releasing locks at once). No catalog is read, so no lock is taken: current_setting()
-- and the poll's pg_stat_activity snapshot only, read one field per backend
-- (pg_stat_get_backend_*()): pg_stat_get_activity() builds a row of 30 columns per backend, which
-- made this statement twice as costly at 55 sessions. The entries themselves are counted from the
-- poll's one read of pg_locks (queries/advisory_locks.sql).
-- autovacuum_worker_slots is 18+ (NULL before). The LWLock is named LockManager from 13 on,
-- lock_manager on 12. Without pg_monitor, other roles' wait events read as "<insufficient
-- privilege>". own_pid: the exporter's own backend, whose entries (its poll's catalog locks past
-- the fast-path slots) are left out of every count: it is not a session of the server's users.
SELECT current_setting('max_locks_per_transaction')::int8 AS max_locks_per_transaction,
       current_setting('max_connections')::int8 AS max_connections,
       current_setting('autovacuum_max_workers')::int8 AS autovacuum_max_workers,
       current_setting('autovacuum_worker_slots', true)::int8 AS autovacuum_worker_slots,
       current_setting('max_worker_processes')::int8 AS max_worker_processes,
       current_setting('max_wal_senders')::int8 AS max_wal_senders,
       current_setting('max_prepared_transactions')::int8 AS max_prepared_transactions,
       (SELECT count(*)
        FROM pg_stat_get_backend_idset() b
        WHERE pg_stat_get_backend_wait_event_type(b) = 'LWLock'
          AND pg_stat_get_backend_wait_event(b) IN ('LockManager', 'lock_manager')
          AND pg_stat_get_backend_pid(b) <> pg_backend_pid()) AS lock_manager_waiters,
       pg_backend_pid() AS own_pid
