-- Server values of the timeouts that end sessions (and with them session locks). Runs first in the
-- poll, before the exporter's own SET LOCAL timeouts, so it shows the values other sessions get.
-- The exporter's session turns idle_session_timeout off for itself (session_setup.sql): for a
-- setting its session SET, the value it started with (reset_val), source 'session start'.
SELECT name,
       CASE WHEN source = 'session' THEN reset_val ELSE setting END AS setting,
       unit,
       CASE WHEN source = 'session' THEN 'session start' ELSE source END AS source
FROM pg_settings
WHERE name IN ('idle_in_transaction_session_timeout', 'idle_session_timeout', 'lock_timeout',
               'statement_timeout', 'deadlock_timeout', 'tcp_keepalives_idle',
               'tcp_keepalives_interval')
