-- Server values of the timeouts that end sessions (and with them session locks). Runs first in the
-- poll, before the exporter's own SET LOCAL timeouts, so it shows the values other sessions get.
-- The exporter's session turns idle_session_timeout off for itself (session_setup.sql): for a
-- setting its session SET, the value it started with (reset_val), source 'session start'.
-- Read only when pg_conf_load_time() moved since the last read on this session, $1 (in epoch
-- microseconds, an integer: exact whatever extra_float_digits says; NULL: never read): what the session sees of the settings changes only with a reload of the configuration
-- (its per-role and per-database values are fixed when it starts). Building the pg_settings view
-- costs 0.6 ms, a twentieth of a poll's server CPU at 15k locks; the uncorrelated test is a gate
-- the server evaluates once, before the view (EXPLAIN: "never executed"). No row: unchanged.
SELECT name,
       CASE WHEN source = 'session' THEN reset_val ELSE setting END AS setting,
       unit,
       CASE WHEN source = 'session' THEN 'session start' ELSE source END AS source,
       (extract(epoch FROM pg_conf_load_time()) * 1000000)::int8 AS conf_loaded_us
FROM pg_settings
WHERE name IN ('idle_in_transaction_session_timeout', 'idle_session_timeout', 'lock_timeout',
               'statement_timeout', 'deadlock_timeout', 'tcp_keepalives_idle',
               'tcp_keepalives_interval')
  AND (SELECT (extract(epoch FROM pg_conf_load_time()) * 1000000)::int8) IS DISTINCT FROM $1::int8
