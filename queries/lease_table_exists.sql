-- Whether a configured lock table exists and the exporter's role may read it, asked of the catalog
-- before anything reads the table: a SELECT from a table that does not exist yet (knex creates its
-- lock table at its first migration) or that the role may not read fails, and each failure is an
-- ERROR line in the server's log, one per poll. These functions fail on nothing. {relation} is the
-- quoted relation as a string literal, found on the search_path as the read finds it; {schema} its
-- schema as a string literal, NULL when the table is not qualified: to_regclass() fails on a named
-- schema the role may not use, so it is only asked once that is known.
SELECT s.usable AS schema_usable,
       r.oid IS NOT NULL AS found,
       coalesce(has_any_column_privilege(r.oid, 'SELECT'), false) AS readable
FROM (SELECT {schema}::text IS NULL
               OR coalesce(bool_or(has_schema_privilege(n.oid, 'USAGE')), false) AS usable
      FROM pg_namespace n
      WHERE n.nspname = {schema}) AS s
CROSS JOIN LATERAL (SELECT CASE WHEN s.usable THEN to_regclass({relation}) END AS oid) AS r
