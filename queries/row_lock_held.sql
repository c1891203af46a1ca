-- Which rows of a row_lock table are held: the row's xmax is one of the transaction ids that live
-- sessions hold locks on (from the poll's read of pg_locks), as an xid[] literal. The
-- row is read as the exporter's own snapshot sees it: the version before an uncommitted UPDATE or
-- DELETE, whose xmax is the writer's; a row locked FOR UPDATE / FOR NO KEY UPDATE / FOR SHARE /
-- FOR KEY SHARE by one transaction carries that transaction's id too. A row locked by several
-- transactions at once carries a multixact id instead, from another number space: a multixact id
-- may equal a live transaction id by chance, and naming that session would be wrong. So a row
-- whose xmax could be a multixact id still in use in this database (from datminmxid up to the
-- next multixact id, by mxid_age, which never fails) is never matched. Multixact members are not
-- read (pg_get_multixact_members on a plain transaction id would name wrong sessions).
(t.xmax = ANY ({xids}::xid[])
 AND NOT (mxid_age(t.xmax) > 0
          AND mxid_age(t.xmax) <= (SELECT mxid_age(d.datminmxid)
                                   FROM pg_database d
                                   WHERE d.datname = current_database())))
