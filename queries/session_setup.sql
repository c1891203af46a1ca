-- Once per connection: the exporter's session is read-only and never leaves a transaction open.
SET default_transaction_read_only = on;
-- ... and is never ended by idle_session_timeout (14+): a role or database setting shorter than the
-- poll interval would end it between polls, and its end would count in that database's session
-- counters, where a lock holder's clean close could be taken for it.
SELECT set_config('idle_session_timeout', '0', false)
WHERE current_setting('server_version_num')::int >= 140000
