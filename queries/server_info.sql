-- Server identity and clock. now() is the start of the poll's transaction: every age and time left
-- is computed against it, never against the exporter's clock. A new pg_postmaster_start_time()
-- means the server restarted and every lock seen before is gone; a promotion keeps it (the
-- postmaster lives on, and so do its sessions and their locks): only in_recovery changes.
SELECT current_setting('server_version') AS server_version,
       current_setting('server_version_num')::int AS server_version_num,
       date_part('epoch', pg_postmaster_start_time()) AS postmaster_start,
       date_part('epoch', now()) AS now,
       pg_is_in_recovery() AS in_recovery,
       -- The language of the server's log: the lock-wait lines are translated text (the server
       -- log reader says when it cannot read them).
       current_setting('lc_messages') AS lc_messages
