-- The type of one field of a configured lock table, checked before the table is first read so a
-- wrong column or expression is named by its config key instead of failing every poll. {table} is
-- the quoted relation, {field} a quoted column (t."col") or the operator's parenthesised
-- expression over the row `t`. No row is read: the empty subquery, LEFT JOINed to one row, yields a
-- NULL that keeps the field's type. The type is the base type for a domain.
SELECT format_type(coalesce(nullif(ty.typbasetype, 0), ty.oid), NULL) AS type
FROM (VALUES (1)) AS one (x)
LEFT JOIN (SELECT {field} AS value FROM {table} AS t WHERE false) AS f ON true
JOIN pg_type ty ON ty.oid = pg_typeof(f.value)
