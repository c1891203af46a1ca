-- Once per connection: the exporter's session is read-only and never leaves a transaction open.
SET default_transaction_read_only = on;
-- ... and is never ended by idle_session_timeout (14+): a role or database setting shorter than the
-- poll interval would end it between polls, and its end would count in that database's session
-- counters, where a lock holder's clean close could be taken for it.
SELECT set_config('idle_session_timeout', '0', false)
WHERE current_setting('server_version_num')::int >= 140000;
-- ... and keeps the memory of one poll for the next. Each poll's read of pg_locks needs memory in
-- proportion to the locks held (pg_locks materialised, then grouped), freed when the statement
-- ends. glibc's malloc gives free memory at the top of its heap back to the kernel once there is
-- more than its trim threshold of it, and that threshold starts low (128 kB, then twice the
-- largest block it has unmapped): a new backend so returns a poll's memory after each poll and
-- faults it in again at the next, at 15k held locks 500 page faults (2 MB) and 0.75 ms of an
-- 8.8 ms read. Freeing one 8 MiB block here once raises the threshold to 16 MiB (mallopt(3),
-- M_MMAP_THRESHOLD: the thresholds follow freed blocks up to 32 MiB): the backend keeps what its
-- polls use, up to that much, and faults none of it in again. One allocation for the few
-- milliseconds of this statement (8 KiB copied 1024 times: one byte 8 Mi times takes 25 ms); with
-- another allocator, nothing else.
SELECT octet_length(repeat(repeat('x', 8192), 1024))
