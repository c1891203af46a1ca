-- After a lock table's read failed though its types were right: runs one of the operator's
-- expressions alone over the rows a poll reads, to name the one that fails (a division by zero, a
-- bad cast). {expression} is parenthesised, {table} the quoted relation, {limit} poll.max_leases.
SELECT count({expression} IS NULL) AS evaluated
FROM (SELECT * FROM {table} LIMIT {limit}) AS t
