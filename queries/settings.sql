-- Server values of the timeouts that end sessions (and with them session locks). Runs first in the
-- poll, before the exporter's own SET LOCAL timeouts, so it shows the values other sessions get.
SELECT name, setting, unit, source
FROM pg_settings
WHERE name IN ('idle_in_transaction_session_timeout', 'idle_session_timeout', 'lock_timeout',
               'statement_timeout', 'deadlock_timeout', 'tcp_keepalives_idle',
               'tcp_keepalives_interval')
