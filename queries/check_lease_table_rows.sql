-- --check-targets: every row of one configured lock table, matched by where_sql and held_sql or
-- not, so the rows that are neither held nor expired can be shown as free. {table} is the quoted
-- relation.
SELECT count(*) AS total FROM {table}
