-- The type of one configured column of a lock table (no row when the column does not exist),
-- checked before the table is first read. {relation} is the quoted relation as a string literal,
-- {column} the column name as a string literal. The type is the base type for a domain.
SELECT format_type(coalesce(nullif(ty.typbasetype, 0), ty.oid), NULL) AS type
FROM pg_attribute a
JOIN pg_type ty ON ty.oid = a.atttypid
WHERE a.attrelid = {relation}::regclass AND a.attname = {column} AND a.attnum > 0
  AND NOT a.attisdropped
