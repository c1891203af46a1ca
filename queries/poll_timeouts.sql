-- Inside each poll's implicit transaction only ({statement_ms}, {lock_ms} from poll.timeout):
-- set_config(..., true) is SET LOCAL, so the session keeps the server's values and pg_settings
-- shows what other sessions get. One statement, so a batch gets one result for it.
SELECT set_config('statement_timeout', '{statement_ms}ms', true),
       set_config('lock_timeout', '{lock_ms}ms', true)
