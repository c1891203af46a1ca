-- --check-targets: one configured lock table before it is read. Whether it exists, whether the
-- exporter's role may SELECT it, its schema and owner (for the GRANT and ALTER DEFAULT PRIVILEGES
-- to suggest) and its columns with their types. $1 is the quoted relation as text.
SELECT c.oid IS NOT NULL AS found,
       coalesce(has_table_privilege(c.oid, 'SELECT'), false) AS may_select,
       quote_ident(n.nspname) AS schema,
       quote_ident(pg_get_userbyid(c.relowner)) AS owner,
       (SELECT string_agg(quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod),
                          ', ' ORDER BY a.attnum)
        FROM pg_attribute a
        WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns
FROM (SELECT to_regclass($1) AS oid) AS r
LEFT JOIN pg_class c ON c.oid = r.oid
LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
