-- The schema.table of relations that the server's log names by OID ("tuple (0,5) of relation 16407
-- of database 16384"), so that a logged wait is named as the poll names it. {oids} is an oid[]
-- literal of at most a few hundred OIDs. Only this database's relations (and the shared catalogs)
-- can be named here: `datid` says which database that is, on every row, and the one row with a
-- NULL relid when none of the OIDs is found.
SELECT d.oid::int8 AS datid,
       c.oid::int8 AS relid,
       n.nspname || '.' || c.relname AS name
FROM pg_database d
LEFT JOIN pg_class c ON c.oid = ANY ({oids}::oid[])
LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE d.datname = current_database()
