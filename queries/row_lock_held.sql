-- Whether a row of a row_lock table is held by an open transaction. The row is read as the
-- exporter's own snapshot sees it: the version before an uncommitted UPDATE or DELETE, whose xmax
-- is the writer's; a row locked FOR UPDATE / FOR NO KEY UPDATE / FOR SHARE / FOR KEY SHARE by one
-- transaction carries that transaction's id too. Held when its xmax is
--   - one of {xids}, the transaction ids live sessions hold locks on (from the poll's read of
--     pg_locks, as an xid[] literal): the client names that session; or
--   - a transaction still in progress by the server's own records (txid_status): a subtransaction
--     released into its open parent (whose own lock PostgreSQL dropped), a prepared transaction,
--     or one that began after the pg_locks read. Its session is not known. The 32-bit xmax is
--     widened to 64 bits from the server's next transaction id: age() counts back from it (one
--     value for the whole statement, never assigning an id), so the id passed to txid_status is
--     always in the past (a future one would be an error); an id too old for the commit log reads
--     as NULL, not held. The next id in 64 bits is the snapshot's xmax plus age() of its low bits.
-- A row locked by several transactions at once carries a multixact id instead, from another number
-- space: a multixact id may equal a live transaction id by chance, and naming that session would be
-- wrong. So a row whose xmax could be a multixact id still in use in this database (from
-- datminmxid up to the next multixact id, by mxid_age, which never fails) is never held by this
-- rule. Multixact members are not read (pg_get_multixact_members on a plain transaction id would
-- name wrong sessions).
(t.xmax <> '0'
 AND NOT (mxid_age(t.xmax) > 0
          AND mxid_age(t.xmax) <= (SELECT mxid_age(d.datminmxid)
                                   FROM pg_database d
                                   WHERE d.datname = current_database()))
 AND (t.xmax = ANY ({xids}::xid[])
      OR (CASE WHEN age(t.xmax) > 0
                    AND (SELECT txid_snapshot_xmax(s)
                                + CASE WHEN txid_snapshot_xmax(s) % 4294967296 >= 3
                                     THEN age((txid_snapshot_xmax(s) % 4294967296)::text::xid) END
                         FROM txid_current_snapshot() s) - age(t.xmax) >= 3
               THEN txid_status((SELECT txid_snapshot_xmax(s)
                                        + CASE WHEN txid_snapshot_xmax(s) % 4294967296 >= 3
                                             THEN age((txid_snapshot_xmax(s) % 4294967296)::text::xid) END
                                 FROM txid_current_snapshot() s) - age(t.xmax)) = 'in progress'
          END) IS TRUE))
