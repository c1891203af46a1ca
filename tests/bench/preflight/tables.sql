WITH l AS MATERIALIZED (
  SELECT l.relation, l.pid, l.mode, l.granted
  FROM pg_locks l
  WHERE l.locktype = 'relation'
    AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
    AND l.pid IS DISTINCT FROM pg_backend_pid()
)
SELECT w.ord,
       w.label,
       c.oid IS NOT NULL AS found,
       l.pid,
       l.mode,
       l.granted
FROM unnest(ARRAY['pg_catalog.pg_class','pg_catalog.pg_attribute']::text[], ARRAY['pg_catalog','pg_catalog']::text[], ARRAY['pg_class','pg_attribute']::text[])
       WITH ORDINALITY AS w(label, schema_name, table_name, ord)
LEFT JOIN LATERAL (SELECT c.oid
                   FROM pg_class c
                   JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE c.relname = w.table_name
                     AND c.relkind IN ('r', 'p', 'm', 'f', 'v')
                     AND CASE WHEN w.schema_name IS NULL THEN pg_table_is_visible(c.oid)
                              ELSE n.nspname = w.schema_name END
                   LIMIT 1) c ON true
LEFT JOIN l ON l.relation = c.oid
ORDER BY w.ord
