-- One configured lease table. {name} {holder} {taken_at} {expires_at} {table} are replaced by
-- identifiers quoted with PQescapeIdentifier, {limit} by poll.max_leases. The window counts run
-- over the whole table before LIMIT, so the per-state totals stay exact.
SELECT {name}::text AS name,
       {holder}::text AS holder,
       extract(epoch FROM {taken_at})::float8 AS taken_at,
       extract(epoch FROM {expires_at})::float8 AS expires_at,
       count(*) FILTER (WHERE {expires_at} > now()) OVER () AS held,
       count(*) OVER () AS total,
       extract(epoch FROM now())::float8 AS now
FROM {table}
ORDER BY {expires_at} ASC NULLS FIRST, {name}
LIMIT {limit}
