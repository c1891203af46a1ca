-- The key of a [[targets.locks]] key_sql, key1_sql or key2_sql: the operator's expression (trusted
-- like the DSN), run once per connection in the exporter's read-only, timeout-bounded transaction.
-- {expression} is the configured text, {type} bigint or int4.
SELECT ({expression})::{type} AS key
