#!/usr/bin/env python3
"""A job loop that takes, uses and releases one advisory lock every second in the ordinary ways
that must count no loss and no takeover, each job a psql process of its own (its own session), for
SECONDS seconds:

  unlock     lock, work, unlock, close
  close      lock, work, close without unlocking (a clean close)
  contend    two workers at once: the second gets the lock when the first closes
  migration  BEGIN, lock the key, change the schema, COMMIT, unlock, close
  xact       BEGIN, pg_advisory_xact_lock, work, COMMIT, close

  job_loop.py --psql PATH --lock-text TEXT --seconds S [--kinds xact,unlock,...]

--kinds runs only those jobs, in turn (default: all five). Through a transaction pooler only
"xact" is correct: the pooler hands the server connection to another client after each
transaction, so a session lock taken through it would leak.

The key is hashtextextended(TEXT, 0). psql connects with the libpq environment (PGHOST, PGUSER,
PGAPPNAME, ...) of the caller; the migration job needs to own table job_loop_schema. Prints one
line per job that failed and a summary line "job-loop: N jobs ... F failed". Exits 1 when a job
failed. Standard library only (Debian python3).
"""

import argparse
import subprocess
import sys
import time

WORK = "SELECT pg_sleep({secs});"


def jobs(key, n):
    lock = "SELECT pg_advisory_lock({});".format(key)
    unlock = "SELECT pg_advisory_unlock({});".format(key)
    work = WORK.format(secs=round(0.4 + (n * 0.137) % 0.5, 3))
    return {
        "unlock": [[lock, work, unlock]],
        "close": [[lock, work]],
        "contend": [[lock, work], [lock, work]],
        "migration": [
            [
                "BEGIN;",
                lock,
                "ALTER TABLE job_loop_schema ADD COLUMN IF NOT EXISTS c{} int;".format(n),
                work,
                "INSERT INTO job_loop_schema (version) VALUES ({});".format(n),
                "COMMIT;",
                unlock,
            ]
        ],
        "xact": [["BEGIN;", "SELECT pg_advisory_xact_lock({});".format(key), work, "COMMIT;"]],
    }


def start(psql, statements):
    proc = subprocess.Popen(
        [psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdin.write("\n".join(statements) + "\n")
    proc.stdin.close()  # psql runs the statements, then exits and closes its session cleanly
    return proc


def finish(kind, proc):
    """Reports an ended job; returns 1 when it failed."""
    err = proc.stderr.read().strip()
    proc.stderr.close()
    if proc.returncode == 0:
        return 0
    print("job-loop: %s job failed (exit %d): %s" % (kind, proc.returncode, err), flush=True)
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--psql", required=True)
    ap.add_argument("--lock-text", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    all_kinds = ["unlock", "close", "contend", "migration", "xact"]
    ap.add_argument("--kinds", default=",".join(all_kinds))
    args = ap.parse_args()
    key = "hashtextextended('{}', 0)".format(args.lock_text.replace("'", "''"))
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in all_kinds]
    if unknown or not kinds:
        ap.error("--kinds: unknown job kind(s) %s; known: %s" % (unknown, ", ".join(all_kinds)))
    running = []
    counts = {k: 0 for k in kinds}
    failed = 0
    end = time.monotonic() + args.seconds
    n = 0
    next_at = time.monotonic()
    while time.monotonic() < end:
        kind = kinds[n % len(kinds)]
        for statements in jobs(key, n)[kind]:
            running.append((kind, start(args.psql, statements)))
        counts[kind] += 1
        n += 1
        next_at += 1.0
        time.sleep(max(0.0, next_at - time.monotonic()))
        still = []
        for kind_run, proc in running:
            if proc.poll() is None:
                still.append((kind_run, proc))
            else:
                failed += finish(kind_run, proc)
        running = still
    for kind_run, proc in running:
        proc.wait()
        failed += finish(kind_run, proc)
    print(
        "job-loop: %d jobs (%s) in %.0f s, %d failed"
        % (n, ", ".join("%s %d" % (k, counts[k]) for k in kinds), args.seconds, failed),
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
