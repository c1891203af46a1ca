-- Once per connection: the exporter's session is read-only and never leaves a transaction open.
SET default_transaction_read_only = on;
-- ... and writes every float so that it reads back to the same value (a role or database setting
-- of 0 or less would round them): the quiet holders' state_change goes back to the server, which
-- compares it for equality (queries/advisory_locks_quiet.sql).
SET extra_float_digits = 1;
-- ... and is never ended by idle_session_timeout (14+): a role or database setting shorter than the
-- poll interval would end it between polls, and its end would count in that database's session
-- counters, where a lock holder's clean close could be taken for it.
SELECT set_config('idle_session_timeout', '0', false)
WHERE current_setting('server_version_num')::int >= 140000
