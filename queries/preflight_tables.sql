-- The relation locks on the tables of a target's preflight_tables, for the gauges of whether an
-- ACCESS EXCLUSIVE lock would wait now (exporter/collectors/preflight_tables.h). Read at inventory
-- polls only, and only for targets that list tables. {labels}, {schemas} (NULL: the first visible
-- on the search_path) and {names} are text[] literals of one element per table, in the config's
-- order. pg_locks is materialised once (fast-path locks included: a reader's ACCESS SHARE is one)
-- and filtered to this database's relation locks before the join, so its cost is one read of the
-- lock table whatever the number of tables. One row per (table, lock), and one with NULL lock
-- columns for a table nobody locks; `found` is false for a table that does not exist.
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
FROM unnest({labels}::text[], {schemas}::text[], {names}::text[])
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
