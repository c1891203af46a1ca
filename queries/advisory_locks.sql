-- The poll's one read of pg_locks. Reading pg_locks holds every lock-manager partition lock for
-- the read and costs in proportion to all the locks held, whatever the filter: so one statement
-- reads both what the advisory collector needs and the pending requests of every other lock type
-- that the lock-wait metrics need (exporter/collectors/lock_waits.h), filtered inside the server
-- so only those rows cross the wire. Prepared once per connection in two variants:
--   {inventory} true:  every advisory lock, held or waited for, and every pending request;
--   {inventory} false: the cheap tier of a poll: pending requests only (advisory ones included),
--                      and only when some backend waits on a lock. The EXISTS is uncorrelated, so
--                      the server evaluates it once, as a gate, before reading pg_locks: while
--                      nobody waits, pg_locks is not read at all. It reads the same
--                      pg_stat_activity snapshot as the activity statement of this poll, one
--                      field per backend (the gate of queries/lock_waits.sql).
-- The inventory also counts the shared lock table (exporter/collectors/lock_table.h): every row
-- outside the fast path is an entry. Those it has no other use for (granted locks of other types,
-- prepared transactions') are granted rows with their locktype set, to be counted by pid and
-- locktype alone (the exporter's own backend holds neither advisory nor transactionid locks: it
-- takes none and writes nothing; the collector leaves its other rows out of the count). The cheap
-- tier counts nothing: it must not read every lock.
-- The filter is the one column test `NOT l.fastpath` (advisory locks and pending requests never
-- take the fast path): cheaper per row than telling the kinds apart in the WHERE clause, at 100k
-- rows.
-- {waitstart}: pg_locks.waitstart on 14+, NULL on 12/13 (no such column there).
-- {xids} true (a target with a row_lock table, inventory only): also every granted transactionid
--   lock, top-level and subtransaction ids alike (one per session that wrote or locked a row), with
--   its xid in `transactionid`: the row-lock tables' xmax are matched against them. Those rows'
--   locktype is NULL like the advisory ones'; a granted row with a transactionid is one of them.
--   Without {xids} granted transactionid locks are only counted (transactionid NULL, one row a
--   session).
-- transactionid: on a pending request, the xid waited for (transactionid waits).
-- For pending requests only (NULL on granted rows, which are mostly advisory and can be 100k: a
-- test of a boolean per row costs next to nothing, a text comparison would not):
--   locktype (and on the granted rows only counted, see above), mode;
--   relation: schema.table where the OID can be resolved here (a relation of the polled database
--             or a shared catalog), else the OID: another database's OID means nothing in this
--             one; '' for lock types without a relation;
--   locktag:  names the object: equal for requests on one object, so a blocker queued for the
--             same object can be told from one that holds it.
-- Grouped here: the rows that agree on the first seven columns come back as one, `entries`
-- counts them and `keys` lists their keys, each (classid << 32) | objid, in the order pg_locks
-- gave them. The granted advisory locks of one session (up to 100k) so come back as one row per
-- database, share mode and key form: the server sends, and libpq stores, one value a lock
-- instead of 13 columns, which was most of both sides' cost of a poll (docs/performance.md).
-- `keys` is read on the rows of advisory locks only (locktype NULL or 'advisory'). It is filtered
-- on objid, a NULL test per row, rather than on a second text comparison per row (2% of the
-- poll's backend CPU at 15k locks): rows of other lock types with an objid (object, spectoken,
-- applytransaction) carry keys that nobody reads, and those types are rare outside DDL. A
-- pending request is a row of its own: a process waits for one lock at a time, and the columns
-- that only a pending request has are taken from its one row (min() over one value).
-- quiet_join (an inventory with the quiet holders of the last one; PollPlan::quiet_baseline):
--   $1 int4[], $2 float8[]: sessions that held advisory locks at the last inventory and were idle
--   outside any transaction across its read of pg_locks, with that idle spell's state_change. A
--   session still idle with the same state_change in this poll's snapshot of pg_stat_activity has
--   run no statement since, so it holds the same locks: it is quiet. Its granted rows come back as
--   one per session: `granted` NULL marks it, `entries` counts its rows and `digest` sums their
--   keys, and the exporter takes its locks from the last inventory when both agree. The server
--   still reads every lock and sums every quiet key; it skips what costs per row (grouping by the
--   lock columns, the mode's text test, listing and sending the keys). The snapshot is taken
--   before pg_locks is read: a quiet session that takes or lets go of a lock in between changes its
--   count or its sum, and the poll falls back to the tiered poll's holders
--   (exporter/events/inventory.h); a change that keeps both (keys 10 and 13 let go, 11 and 12
--   taken) is seen at the next inventory. A pending request of such a session is a row of its own,
--   as any other. The look-up is one pg_stat_get_activity(pid) a candidate, not every session's 30
--   columns. quiet_join is queries/advisory_locks_quiet.sql and unquiet `(q.pid IS NULL OR NOT
--   l.granted)`. Without it (no such session, or the tiered poll) quiet_join is empty and unquiet
--   true: the planner folds the tests away, and the statement is the one it was but for `digest`,
--   an aggregate whose filter is false.
-- The grouping must be done by hashing: sorted, it costs more than sending every row. xid, the
-- type of transactionid, can be hashed but not sorted, so grouping by it leaves the planner no
-- other way (the statement's test reads its plan).
SELECT l.pid,
       CASE WHEN {unquiet} THEN l.database END AS database,
       CASE WHEN {unquiet} THEN l.objsubid END AS objsubid,
       CASE WHEN {unquiet} THEN l.mode = 'ExclusiveLock' END AS exclusive,
       CASE WHEN {unquiet} THEN l.granted END AS granted,
       CASE WHEN {unquiet}
             AND (NOT l.granted
                  OR NOT (l.locktype = 'advisory' OR ({xids} AND l.locktype = 'transactionid'))
                  OR l.pid IS NULL)
            THEN l.locktype END AS locktype,
       CASE WHEN {unquiet} AND (NOT l.granted OR {xids}) THEN l.transactionid END AS transactionid,
       min({waitstart}) FILTER (WHERE NOT l.granted) AS waitstart,
       min(l.mode) FILTER (WHERE NOT l.granted) AS mode,
       min(CASE WHEN l.relation IS NULL THEN ''
                WHEN l.database = 0
                  OR l.database = (SELECT d.oid FROM pg_database d
                                   WHERE d.datname = current_database())
                THEN coalesce((SELECT (SELECT n.nspname FROM pg_namespace n
                                       WHERE n.oid = c.relnamespace) || '.' || c.relname
                               FROM pg_class c
                               WHERE c.oid = l.relation),
                              l.relation::text)
                ELSE l.relation::text END) FILTER (WHERE NOT l.granted) AS relation,
       min(concat_ws(':', l.locktype, l.database, l.relation, l.page, l.tuple, l.virtualxid,
                     l.transactionid, l.classid, l.objid, l.objsubid))
         FILTER (WHERE NOT l.granted) AS locktag,
       count(*) AS entries,
       sum((l.classid::int8 << 32) | l.objid::int8) FILTER (WHERE NOT {unquiet}) AS digest,
       array_agg((l.classid::int8 << 32) | l.objid::int8)
         FILTER (WHERE {unquiet} AND l.objid IS NOT NULL) AS keys
FROM pg_locks l
{quiet_join}
WHERE NOT l.fastpath
  AND ({inventory} OR (NOT l.granted AND l.pid <> pg_backend_pid()))
  AND ({inventory}
       OR EXISTS (SELECT 1
                  FROM pg_stat_get_backend_idset() b
                  WHERE pg_stat_get_backend_wait_event_type(b) = 'Lock'
                    AND pg_stat_get_backend_pid(b) <> pg_backend_pid()))
GROUP BY 1, 2, 3, 4, 5, 6, 7
