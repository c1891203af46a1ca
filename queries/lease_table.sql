-- One configured lock table, its row aliased `t`. {name} {holder} {taken_at} {expires_at} are each
-- a quoted column (t."col"), the operator's parenthesised expression, or a typed NULL when the
-- table has no such field; {expires_at} is ({taken_at} + ttl) for a table with a ttl. {held} says
-- which rows are held ({expires_at} > now(), or true where held_sql already filters the rows),
-- {where} which rows are read at all (where_sql AND held_sql, or true; for a row_lock table
-- where_sql AND (held_sql OR the row lock of queries/row_lock_held.sql)), {xmax} the row's xmax
-- and {row_locked} that row lock, for a row_lock table, else NULL and false. {table} is the quoted
-- relation, {limit} poll.max_leases. The window counts run over every matching row before LIMIT,
-- so the per-state totals stay exact.
SELECT {name}::text AS name,
       {holder}::text AS holder,
       date_part('epoch', ({taken_at})::timestamptz) AS taken_at,
       date_part('epoch', ({expires_at})::timestamptz) AS expires_at,
       count(*) FILTER (WHERE {held}) OVER () AS held,
       count(*) OVER () AS total,
       date_part('epoch', now()) AS now,
       {xmax} AS xmax,
       {row_locked} AS row_locked
FROM {table} AS t
WHERE {where}
ORDER BY ({expires_at})::timestamptz ASC NULLS FIRST, 1
LIMIT {limit}
