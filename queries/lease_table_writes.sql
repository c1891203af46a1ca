-- The write counters of one configured lease table: the evidence that tells a lease given back and
-- retaken between two polls from one changed under its holder (exporter/snapshot/events.cc).
-- {relation} is the quoted relation as a string literal. Sent in the same round trip as
-- lease_table.sql and BEFORE it: under READ COMMITTED the rows' snapshot is taken after these
-- counters were read, so every write counted here is visible in the rows of the same poll.
-- `counted` is false when the counters do not follow the table's writes: on a standby (replay is not
-- counted), with track_counts off, or for a partitioned table (its partitions count).
-- The functions behind pg_stat_all_tables' n_tup_upd and n_tup_del (12 to 18), not the view:
-- planning the view, at every poll, cost five times what running it did.
SELECT pg_stat_get_tuples_updated(c.oid) AS updated,
       pg_stat_get_tuples_deleted(c.oid) AS deleted,
       c.relkind = 'r' AND current_setting('track_counts')::boolean AND NOT pg_is_in_recovery()
         AS counted
FROM pg_class c
WHERE c.oid = {relation}::regclass
