-- Inside each poll's implicit transaction only ({statement_ms}, {lock_ms} from poll.timeout): the
-- session keeps the server's values, so pg_settings shows what other sessions get.
SET LOCAL statement_timeout = '{statement_ms}ms';
SET LOCAL lock_timeout = '{lock_ms}ms'
