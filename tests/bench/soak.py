#!/usr/bin/env python3
"""The soak of tests/bench/soak.sh: one exporter under realistic lock traffic for many minutes, its
cost sampled once a minute, and what it recorded set against what the workload did.

  soak.py run --url URL --pid PID --psql PATH --interval S --minutes N --idle N --warmup S
              --events-log FILE --json OUT
      PGHOST, PGPORT and PGDATABASE name the server (soak.sh sets them). Phases: IDLE minutes
      with no traffic (the baseline), N minutes of traffic, IDLE minutes after it. Every 15 s a
      scrape with Accept-Encoding: gzip (as Prometheus asks); at every minute's end one plain
      scrape and a sample: VmRSS, the CPU of the exporter (schedstat run time of its threads, and
      utime+stime) and of its backends since the sample before, polls made in the minute (the
      advance of
      pglock_last_poll_success_timestamp_seconds in whole intervals: the exporter has no poll
      counter), series and bytes of /metrics, series of the job queue, the load average, and what
      the workload did in the minute. After the last minute, /api/v1/events. Every injection is
      also written as one JSON line to the events log.
  soak.py report --json FILE --header TEXT
      Prints the Markdown report: the per-minute table, the summary and the event tallies.

The traffic (each piece a thread with psql sessions of its own; tests/e2e/job_loop.py and
tests/e2e/lease_cycle.py are two of them):

  handovers     two named advisory locks, each passed back and forth between two sessions: the
                holder keeps it 2.5-4 s, the other asks for it and the holder unlocks at once
  job-loop      tests/e2e/job_loop.py on the named lock "job-loop" (a new session a second;
                unlock, clean close, transaction lock): must count no loss and no takeover
  losses        the named lock "nightly-report" every 30 s, in turn: its holder terminated by
                pg_terminate_backend and the key taken 2 s later; or its holder left idle in
                transaction under its role's 3 s idle_in_transaction_session_timeout while another
                session waits for the key (a blocking episode whose root ends)
  deadlocks     every 90 s two sessions take two transaction-level advisory locks in opposite
                order; the server cancels one
  episodes      every 60 s a transaction updates an accounts row and sits idle for 5 s while two
                sessions wait to update it
  leases        tests/e2e/lease_cycle.py on two leases (a new holder every 3 s: a hand-over); a
                third lease renewed every 5 s; a fourth taken for 2 s, left to expire and taken
                over every 60 s; 20 stable leases held throughout
  job queue     a producer keeps about 8 jobs queued; two workers claim one at a time with
                FOR UPDATE SKIP LOCKED, work 0.3-1.2 s, mark it done; done jobs older than a
                minute are deleted every minute

Standard library only (Debian python3).
"""
import argparse
import glob
import json
import os
import random
import select
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from fleet import cpu_seconds, minor_faults, schedstat_seconds, status  # noqa: E402
from lease_cycle import GIVE_BACK, TAKE  # noqa: E402
from scale import fetch, samples  # noqa: E402

HANDOVER_LOCKS = ["billing-run", "search-reindex"]
LOSS_LOCK = "nightly-report"
JOB_LOOP_LOCK = "job-loop"
CYCLE_LEASES = ["scheduler-leader", "compactor"]
RENEWED_LEASE = "partition-janitor"
EXPIRING_LEASE = "cron-nightly"
DEADLOCK_KEYS = (90001, 90002)


def key(name):
    return "hashtextextended('%s', 0)" % name


# --- psql sessions -------------------------------------------------------------------------------

class Psql:
    """One psql process kept open. run() sends statements and returns their output lines (errors
    included) once a marker echoed after them comes back; submit() and collect() split that for a
    statement that waits for a lock."""

    def __init__(self, psql, app, user="soak_app"):
        env = dict(os.environ, PGAPPNAME=app, PGUSER=user)
        self.p = subprocess.Popen([psql, "-X", "-q", "-At"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        self.buf = b""
        self.n = 0
        self.app = app

    def submit(self, sql):
        self.n += 1
        marker = "__soak_%d__" % self.n
        sql = sql.rstrip()
        if not sql.endswith(";"):
            sql += ";"  # else psql would run the echo below before the statement
        self.p.stdin.write(("%s\n\\echo %s\n" % (sql, marker)).encode())
        self.p.stdin.flush()
        return marker

    def collect(self, marker, timeout=120):
        end = time.monotonic() + timeout
        tail = ("%s\n" % marker).encode()
        fd = self.p.stdout.fileno()
        while True:
            at = self.buf.find(tail)
            if at >= 0 and (at == 0 or self.buf[at - 1:at] == b"\n"):
                out, self.buf = self.buf[:at], self.buf[at + len(tail):]
                return out.decode(errors="replace").splitlines()
            left = end - time.monotonic()
            if left <= 0:
                raise RuntimeError("%s: no answer in %d s; so far: %r" % (self.app, timeout,
                                                                           self.buf[-500:]))
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise EOFError("%s: psql ended; output: %r" % (self.app, self.buf[-500:]))
                self.buf += chunk

    def run(self, sql, timeout=120):
        return self.collect(self.submit(sql), timeout)

    def value(self, sql):
        out = self.run(sql)
        if len(out) != 1 or out[0].startswith(("ERROR", "FATAL")):
            raise RuntimeError("%s: %s -> %r" % (self.app, sql, out))
        return out[0]

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass  # a terminated session's psql may have gone already
        self.p.wait(timeout=30)


# --- what the workload did -----------------------------------------------------------------------

class Injected:
    """Counts of what the workload did, by (kind, name); every count also one JSON line."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.counts = {}
        self.errors = []
        self.f = open(path, "a")

    def add(self, kind, name="", n=1, **detail):
        with self.lock:
            k = kind + "|" + name
            self.counts[k] = self.counts.get(k, 0) + n
            self.f.write(json.dumps(dict(t=round(time.time(), 3), kind=kind, name=name, n=n,
                                         **detail)) + "\n")
            self.f.flush()

    def error(self, where, e):
        with self.lock:
            self.errors.append("%s: %s" % (where, e))
            self.f.write(json.dumps(dict(t=round(time.time(), 3), kind="workload_error",
                                         name=where, detail=str(e))) + "\n")
            self.f.flush()

    def snapshot(self):
        with self.lock:
            return dict(self.counts)


def spawn(name, inj, fn):
    """Runs fn on a thread; an exception is recorded (the report shows it) and ends that piece
    alone."""
    def go():
        try:
            fn()
        except Exception as e:  # noqa: BLE001: one broken piece must not stop the others
            inj.error(name, repr(e))
    t = threading.Thread(target=go, name=name, daemon=True)
    t.start()
    return t


def handovers(a, inj, stop, lock, rnd):
    """Two sessions pass a named lock back and forth; every pass a hand-over with no gap."""
    s = [Psql(a.psql, "%s-worker-a" % lock), Psql(a.psql, "%s-worker-b" % lock)]
    k = key(lock)
    s[0].value("SELECT pg_advisory_lock(%s)" % k)
    holder = 0
    while True:
        stop.wait(rnd.uniform(2.5, 4.0))
        if stop.is_set():
            break
        other = 1 - holder
        waiting = s[other].submit("SELECT pg_advisory_lock(%s);" % k)
        if s[holder].value("SELECT pg_advisory_unlock(%s)" % k) != "t":
            raise RuntimeError("%s: not held by %s" % (lock, s[holder].app))
        out = s[other].collect(waiting)
        if out != [""]:
            raise RuntimeError("%s: lock: %r" % (lock, out))
        holder = other
        inj.add("advisory_handover", lock)
    s[holder].value("SELECT pg_advisory_unlock(%s)" % k)
    inj.add("advisory_release_unlocked", lock)
    for x in s:
        x.close()


def losses(a, inj, stop):
    """Every 30 s the holder of LOSS_LOCK loses it, in turn by pg_terminate_backend and by its
    role's idle_in_transaction_session_timeout, and another session takes the key."""
    admin = Psql(a.psql, "soak-admin", user="postgres")
    k = key(LOSS_LOCK)
    n = 0
    stop.wait(10)
    while not stop.is_set():
        started = time.monotonic()
        if n % 2 == 0:
            holder = Psql(a.psql, "report-runner")
            pid = holder.value("SELECT pg_backend_pid()")
            holder.value("SELECT pg_advisory_lock(%s)" % k)
            time.sleep(3)
            if admin.value("SELECT pg_terminate_backend(%s)" % pid) != "t":
                raise RuntimeError("terminate %s failed" % pid)
            inj.add("advisory_loss_terminated", LOSS_LOCK, pid=int(pid))
            holder.close()
            time.sleep(2)
            taker = Psql(a.psql, "report-runner-standby")
            taker.value("SELECT pg_advisory_lock(%s)" % k)
        else:
            # The role soak_iit has idle_in_transaction_session_timeout = 3s in this database.
            holder = Psql(a.psql, "report-runner-iit", user="soak_iit")
            pid = holder.value("SELECT pg_backend_pid()")
            holder.run("BEGIN; SELECT pg_advisory_lock(%s);" % k)
            taker = Psql(a.psql, "report-runner-standby")
            out = taker.run("SELECT pg_advisory_lock(%s);" % k, timeout=30)
            if out != [""]:
                raise RuntimeError("taker after the timeout: %r" % out)
            inj.add("advisory_loss_idle_in_transaction_timeout", LOSS_LOCK, pid=int(pid))
            inj.add("blocking_episode_root_ended", LOSS_LOCK)
            holder.close()
        inj.add("advisory_takeover", LOSS_LOCK)
        time.sleep(3)
        taker.value("SELECT pg_advisory_unlock(%s)" % k)
        inj.add("advisory_release_unlocked", LOSS_LOCK)
        taker.close()
        n += 1
        stop.wait(max(0.0, 30 - (time.monotonic() - started)))
    admin.close()


def deadlocks(a, inj, stop):
    """Every 90 s two transactions take two unnamed advisory keys in opposite order."""
    s1, s2 = Psql(a.psql, "ledger-1"), Psql(a.psql, "ledger-2")
    k1, k2 = DEADLOCK_KEYS
    stop.wait(40)
    while not stop.is_set():
        started = time.monotonic()
        s1.run("BEGIN; SELECT pg_advisory_xact_lock(%d);" % k1)
        s2.run("BEGIN; SELECT pg_advisory_xact_lock(%d);" % k2)
        m1 = s1.submit("SELECT pg_advisory_xact_lock(%d);" % k2)
        time.sleep(0.2)
        m2 = s2.submit("SELECT pg_advisory_xact_lock(%d);" % k1)
        out = s2.collect(m2, 30) + s1.collect(m1, 30)
        s1.run("COMMIT;")
        s2.run("COMMIT;")
        if sum("deadlock detected" in line for line in out) != 1:
            raise RuntimeError("deadlock: %r" % out)
        inj.add("deadlock", "advisory")
        stop.wait(max(0.0, 90 - (time.monotonic() - started)))
    s1.close()
    s2.close()


def episodes(a, inj, stop):
    """Every 60 s a transaction holds an accounts row for 5 s, idle, with two sessions waiting."""
    root = Psql(a.psql, "batch-import")
    waiters = [Psql(a.psql, "checkout-1"), Psql(a.psql, "checkout-2")]
    stop.wait(25)
    n = 0
    while not stop.is_set():
        started = time.monotonic()
        row = 1 + n % 10
        root.run("BEGIN; UPDATE accounts SET balance = balance + 1 WHERE id = %d;" % row)
        marks = [w.submit("UPDATE accounts SET balance = balance - 1 WHERE id = %d;" % row)
                 for w in waiters]
        time.sleep(5)
        root.run("COMMIT;")
        for w, m in zip(waiters, marks):
            out = w.collect(m, 30)
            if out:
                raise RuntimeError("episode waiter: %r" % out)
        inj.add("blocking_episode_released", "accounts")
        n += 1
        stop.wait(max(0.0, 60 - (time.monotonic() - started)))
    root.close()
    for w in waiters:
        w.close()


def lease_cycle(a, inj, lease, seconds):
    """tests/e2e/lease_cycle.py's statements fed to one psql session, each take counted."""
    env = dict(os.environ, PGAPPNAME="lease-" + lease, PGUSER="soak_app")
    gen = subprocess.Popen([sys.executable, os.path.join(HERE, "..", "e2e", "lease_cycle.py"),
                            "--lease", lease, "--seconds", str(seconds), "--work", "3"],
                           stdout=subprocess.PIPE, text=True)
    psql = subprocess.Popen([a.psql, "-X", "-q", "-At", "-o", "/dev/null"],
                            stdin=subprocess.PIPE, text=True, env=env)
    takes = 0
    for line in gen.stdout:
        psql.stdin.write(line)
        psql.stdin.flush()
        if line.startswith("INSERT INTO leases"):
            inj.add("lease_acquired" if takes == 0 else "lease_handover", lease)
            takes += 1
    gen.wait()
    if takes:
        inj.add("lease_released", lease)  # lease_cycle.py's last line gives the lease back
    psql.stdin.close()
    psql.wait()
    if gen.returncode or psql.returncode:
        raise RuntimeError("lease_cycle %s: exit %s, psql %s" % (lease, gen.returncode,
                                                                psql.returncode))


def renewed_lease(a, inj, stop, rnd):
    """One holder keeps a lease and moves its expiry every 5 s."""
    s = Psql(a.psql, "lease-" + RENEWED_LEASE)
    holder = "host-r:%d:%s" % (os.getpid(), "%016x" % rnd.getrandbits(64))
    if s.value(TAKE.format(name=RENEWED_LEASE, holder=holder, secs=30)) != "t":
        raise RuntimeError("could not take " + RENEWED_LEASE)
    inj.add("lease_acquired", RENEWED_LEASE)
    while not stop.wait(5):
        s.run("UPDATE leases SET expires_at = now() + interval '30 s' "
              "WHERE name = '%s' AND holder = '%s';" % (RENEWED_LEASE, holder))
        inj.add("lease_renewed", RENEWED_LEASE)
    s.run(GIVE_BACK.format(name=RENEWED_LEASE, holder=holder))
    inj.add("lease_released", RENEWED_LEASE)
    s.close()


def expiring_lease(a, inj, stop, rnd):
    """Every 60 s a holder takes a 2 s lease and never renews it; 5 s later another takes it over
    (the upsert's expiry test), keeps it 3 s and gives it back."""
    s = Psql(a.psql, "lease-" + EXPIRING_LEASE)
    stop.wait(5)
    while not stop.is_set():
        started = time.monotonic()
        first = "host-x:1:%016x" % rnd.getrandbits(64)
        second = "host-y:2:%016x" % rnd.getrandbits(64)
        if s.value(TAKE.format(name=EXPIRING_LEASE, holder=first, secs=2)) != "t":
            raise RuntimeError("could not take " + EXPIRING_LEASE)
        inj.add("lease_acquired", EXPIRING_LEASE)
        time.sleep(5)
        if s.value(TAKE.format(name=EXPIRING_LEASE, holder=second, secs=30)) != "t":
            raise RuntimeError("could not take over " + EXPIRING_LEASE)
        inj.add("lease_expired_takeover", EXPIRING_LEASE)
        time.sleep(3)
        s.run(GIVE_BACK.format(name=EXPIRING_LEASE, holder=second))
        inj.add("lease_released", EXPIRING_LEASE)
        stop.wait(max(0.0, 60 - (time.monotonic() - started)))
    s.close()


def producer(a, inj, stop):
    """Keeps about 8 jobs queued; once a minute deletes the jobs done more than a minute ago."""
    s = Psql(a.psql, "job-producer")
    last_cleanup = time.monotonic()
    while not stop.wait(0.5):
        queued = int(s.value("SELECT count(*) FROM jobs WHERE status = 'queued'"))
        if queued < 8:
            s.run("INSERT INTO jobs (payload) SELECT md5(random()::text) "
                  "FROM generate_series(1, %d);" % (8 - queued))
            inj.add("job_queued", "jobs", 8 - queued)
        if time.monotonic() - last_cleanup >= 60:
            s.run("DELETE FROM jobs WHERE status = 'done' AND done_at < now() - interval '1 minute';")
            last_cleanup = time.monotonic()
    s.close()


def consumer(a, inj, stop, rnd, n):
    """Claims one job at a time (FOR UPDATE SKIP LOCKED), works 0.3-1.2 s, marks it done."""
    s = Psql(a.psql, "job-worker-%d" % n)
    while not stop.is_set():
        out = s.run("BEGIN; SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1 "
                    "FOR UPDATE SKIP LOCKED;")
        if not out:
            s.run("ROLLBACK;")
            stop.wait(0.2)
            continue
        job = int(out[0])
        time.sleep(rnd.uniform(0.3, 1.2))
        out = s.run("UPDATE jobs SET status = 'done', done_at = now() WHERE id = %d; COMMIT;" % job)
        if out:
            raise RuntimeError("job %d: %r" % (job, out))
        inj.add("job_done", "jobs")
    s.close()


def start_traffic(a, inj, stop, seconds):
    rnd = random.Random(20261205)
    pieces = [("handovers-" + lock, lambda lock=lock, r=random.Random(rnd.random()):
               handovers(a, inj, stop, lock, r)) for lock in HANDOVER_LOCKS]
    pieces += [("losses", lambda: losses(a, inj, stop)),
               ("deadlocks", lambda: deadlocks(a, inj, stop)),
               ("episodes", lambda: episodes(a, inj, stop))]
    pieces += [("lease-" + lease, lambda lease=lease: lease_cycle(a, inj, lease, seconds))
               for lease in CYCLE_LEASES]
    pieces += [("renewed", lambda r=random.Random(rnd.random()): renewed_lease(a, inj, stop, r)),
               ("expiring", lambda r=random.Random(rnd.random()): expiring_lease(a, inj, stop, r)),
               ("producer", lambda: producer(a, inj, stop))]
    pieces += [("consumer-%d" % n, lambda n=n, r=random.Random(rnd.random()):
                consumer(a, inj, stop, r, n)) for n in (1, 2)]
    threads = [spawn(name, inj, fn) for name, fn in pieces]
    env = dict(os.environ, PGAPPNAME=JOB_LOOP_LOCK, PGUSER="soak_app")
    job_loop = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "..", "e2e", "job_loop.py"), "--psql", a.psql,
         "--lock-text", JOB_LOOP_LOCK, "--seconds", str(seconds), "--kinds", "unlock,close,xact"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    return threads, job_loop


# --- the exporter --------------------------------------------------------------------------------

def parse(text):
    """{(name, labels): value}."""
    return {(n, l): v for n, l, v in samples(text)}


def labels_of(lbl):
    out = {}
    for part in lbl.rstrip("}").split('",'):
        k, _, v = part.partition('="')
        if k:
            out[k.strip(",")] = v.rstrip('"')
    return out


def total(m, name, **want):
    s = 0.0
    for (n, lbl), v in m.items():
        if n != name:
            continue
        got = labels_of(lbl)
        if all(got.get(k) == w for k, w in want.items()):
            s += v
    return s


def one(m, name):
    return next(v for (n, _), v in m.items() if n == name)


def backend_cpu(admin, seen):
    """CPU seconds (schedstat) of the exporter's backends, summed over every one seen so far: `seen`
    keeps the last reading of each pid, so a backend that ended still counts what it used."""
    pids = admin.run("SELECT pid FROM pg_stat_activity WHERE usename = 'pglock_exporter';")
    for p in pids:
        try:
            with open("/proc/%d/schedstat" % int(p)) as f:
                seen[int(p)] = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError):
            pass
    return sum(seen.values())


def scrape_plain(url):
    body, seconds, _ = fetch(url)
    return body.decode(), len(body), seconds


def wait_up(url, pid, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        try:
            m = parse(scrape_plain(url)[0])
            if one(m, "pglock_up") == 1 and total(m, "pglock_server_log_up") == 1:
                return
        except (OSError, StopIteration):
            pass
        os.kill(pid, 0)
        time.sleep(0.5)
    sys.exit("the exporter is not up with its server log after %d s" % seconds)


def callgrind_dump(a, label):
    """Instructions the exporter ran since the last dump (valgrind's callgrind, --callgrind):
    callgrind_control writes them to the next numbered file beside --callgrind-out."""
    def numbers():
        return [int(f.rsplit(".", 1)[1]) for f in glob.glob(glob.escape(a.callgrind_out) + ".*")]

    # callgrind_control exits 0 even when it found no callgrind run: the dump is proven by the
    # next numbered file, triggered by this label.
    expected = "%s.%d" % (a.callgrind_out, max(numbers(), default=0) + 1)
    done = subprocess.run(["callgrind_control", "-d", label, str(a.pid)], capture_output=True,
                          text=True, timeout=120)
    total, trigger = None, None
    if os.path.exists(expected):
        with open(expected) as f:
            for line in f:
                if line.startswith("desc: Trigger:"):
                    trigger = line.split(":", 2)[2].strip()
                elif line.startswith(("summary:", "totals:")):
                    total = int(line.split()[1])
    if total is None or trigger != "dump " + label:
        raise RuntimeError("no callgrind dump %s for %r (callgrind_control: %s)" % (
            expected, label, (done.stdout + done.stderr).strip()))
    return total


def run(a):
    inj = Injected(a.events_log)
    admin = Psql(a.psql, "soak-sampler", user="postgres")
    seen_backends = {}
    wait_up(a.url, a.pid)
    time.sleep(a.warmup)
    rows, phases_at, instructions = [], {}, {}

    def reading():
        text, size, scrape_s = scrape_plain(a.url)
        m = parse(text)
        st = status(a.pid)
        return {"t": time.time(), "cpu_s": cpu_seconds(a.pid),
                "sched_s": schedstat_seconds(a.pid), "faults": minor_faults(a.pid), "backend_s": backend_cpu(admin, seen_backends),
                "poll_ts": one(m, "pglock_last_poll_success_timestamp_seconds"),
                "poll_errors": one(m, "pglock_poll_errors_total"),
                "rss_kib": st["VmRSS"], "hwm_kib": st["VmHWM"], "threads": st["Threads"],
                "series": len(m), "bytes": size, "scrape_ms": scrape_s * 1000,
                "job_series": sum(1 for (_, lbl) in m if 'table="jobs"' in lbl),
                "lease_series": sum(1 for (_, lbl) in m if 'table="leases"' in lbl),
                "load": os.getloadavg()[0], "injected": inj.snapshot(), "metrics": m}

    def minutes(phase, count):
        if a.callgrind_out:
            callgrind_dump(a, "until " + phase)  # not counted: what came before the phase
        prev = reading()
        phases_at[phase] = prev["t"]
        first_poll_ts = prev["poll_ts"]
        for i in range(count):
            start = time.monotonic()
            for q in (1, 2, 3):  # Prometheus-like scrapes, gzip, every 15 s
                time.sleep(max(0.0, start + 15 * q - time.monotonic()))
                fetch(a.url, gzip=True)
            time.sleep(max(0.0, start + 60 - time.monotonic()))
            cur = reading()
            polls = round((cur["poll_ts"] - prev["poll_ts"]) / a.interval)
            row = {"phase": phase, "minute": i + 1, "seconds": cur["t"] - prev["t"],
                   "polls": polls, "poll_errors": cur["poll_errors"] - prev["poll_errors"],
                   "cpu_ms": (cur["cpu_s"] - prev["cpu_s"]) * 1000,
                   "sched_ms": (cur["sched_s"] - prev["sched_s"]) * 1000,
                   "backend_ms": (cur["backend_s"] - prev["backend_s"]) * 1000,
                   "faults": cur["faults"] - prev["faults"],
                   "done": {k: v - prev["injected"].get(k, 0)
                            for k, v in cur["injected"].items()}}
            for k in ("rss_kib", "hwm_kib", "threads", "series", "bytes", "scrape_ms",
                      "job_series", "lease_series", "load"):
                row[k] = cur[k]
            rows.append(row)
            print("%-11s %2d: RSS %.1f MiB, CPU %.2f ms/poll (%d polls), %.0f faults/poll, "
                  "%d series, load %.2f" % (
                      phase, i + 1, row["rss_kib"] / 1024, row["sched_ms"] / max(polls, 1), polls,
                      row["faults"] / max(polls, 1), row["series"], row["load"]),
                  file=sys.stderr, flush=True)
            prev = cur
        if a.callgrind_out:
            instructions[phase] = {"ir": callgrind_dump(a, phase),
                                   "polls": round((prev["poll_ts"] - first_poll_ts) / a.interval)}
        return prev

    before = minutes("idle-before", a.idle)
    stop = threading.Event()
    threads, job_loop = start_traffic(a, inj, stop, a.minutes * 60)
    at_traffic_end = minutes("traffic", a.minutes)
    stop.set()
    wound_down = time.time()
    job_loop_out = job_loop.communicate()[0]
    for t in threads:
        t.join(timeout=120)
    still = [t.name for t in threads if t.is_alive()]
    if still:
        inj.error("wind-down", "threads still running: %s" % ", ".join(still))
    wind_down_s = time.time() - wound_down
    time.sleep(15)  # losses wait up to 10 s for the log: let the last judgements land
    after = minutes("idle-after", a.idle)
    with urllib.request.urlopen(a.url.rsplit("/", 1)[0] + "/api/v1/events", timeout=30) as r:
        events = json.load(r)["events"]
    admin.close()
    out = {"rows": rows, "interval": a.interval, "minutes": a.minutes, "idle": a.idle,
           "injected": inj.snapshot(), "workload_errors": inj.errors,
           "job_loop": job_loop_out.strip().splitlines()[-3:] if job_loop_out else [],
           "job_loop_exit": job_loop.returncode, "wind_down_s": wind_down_s,
           "metrics_before": encode(before["metrics"]),
           "metrics_traffic_end": encode(at_traffic_end["metrics"]),
           "metrics_end": encode(after["metrics"]), "events": summarize_events(events),
           "instructions": instructions}
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)


EVENT_FAMILIES = ("pglock_advisory_lock_", "pglock_lease_transitions_total", "pglock_queue_",
                  "pglock_deadlocks_total", "pglock_blocking_episodes_total",
                  "pglock_logged_lock_waits_total", "pglock_sessions_ended_total")


def encode(m):
    """The event counters, and the number of series of every family."""
    families = {}
    for n, _ in m:
        families[n] = families.get(n, 0) + 1
    return {"counters": [[n, lbl, v] for (n, lbl), v in sorted(m.items())
                         if n.startswith(EVENT_FAMILIES)],
            "series_by_family": dict(sorted(families.items()))}


def summarize_events(events):
    """Counts of the events the exporter kept, by kind, cause and evidence."""
    out = {}
    for e in events:
        # A history restored at its bounds (soak.sh --full-history) is not the workload's.
        if (e.get("previous") or {}).get("application_name", "").startswith("history-worker-"):
            continue
        kind = e.get("kind", "")
        named = kind.startswith("lock_") or kind == "blocking_episode"
        k = "|".join([kind, e.get("cause", ""), e.get("evidence", ""),
                      e.get("lock", "") if named else ""])
        out[k] = out.get(k, 0) + e.get("count", 1)
    return out


# --- the report ----------------------------------------------------------------------------------

def per_poll(rows, key):
    polls = sum(r["polls"] for r in rows)
    return sum(r[key] for r in rows) / polls if polls else float("nan")


def ratio(x, y):
    return x / y if y else float("nan")


def report(a):
    with open(a.json) as f:
        d = json.load(f)
    rows = d["rows"]
    m_end = {(n, lbl): v for n, lbl, v in d["metrics_end"]["counters"]}
    m_before = {(n, lbl): v for n, lbl, v in d["metrics_before"]["counters"]}
    inj = d["injected"]
    lines = [a.header, "", "## Per minute", "",
             "CPU is the run time of the exporter's threads in the minute "
             "(`/proc/PID/task/*/schedstat`, nanoseconds), divided by the polls made in it; "
             "utime+stime of `/proc/PID/stat` (10 ms ticks, ended threads included) beside it, and "
             "its minor page faults per poll (faults). The "
             "minute includes three gzip scrapes and one plain scrape. Backend: the run time of the "
             "exporter's PostgreSQL session(s) per poll. RSS: VmRSS at the "
             "minute's end. Series, bytes: the plain scrape at the minute's end; jobs: series "
             "naming the job-queue table. Work done in the minute: advisory hand-overs, losses, "
             "lease hand-overs, jobs finished. Load: 1-minute load average of the machine "
             "(2 CPUs).", "",
             "| phase | min | RSS MiB | threads | CPU ms/poll | utime+stime | faults | backend ms/poll "
             "| polls "
             "| poll errors | series | bytes | jobs series | hand-overs | losses | lease hand-overs "
             "| jobs done | load |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        done = r["done"]
        losses_n = sum(v for k, v in done.items() if k.startswith("advisory_loss_"))
        lines.append("| %s | %d | %.1f | %d | %.2f | %.2f | %s | %.2f | %d | %d | %d | %s | %d | %d "
                     "| %d | %d | %d | %.2f |" % (
                         r["phase"], r["minute"], r["rss_kib"] / 1024, r["threads"],
                         ratio(r["sched_ms"], r["polls"]), ratio(r["cpu_ms"], r["polls"]),
                         "%.0f" % ratio(r["faults"], r["polls"]) if "faults" in r else "",
                         ratio(r["backend_ms"], r["polls"]),
                         r["polls"], r["poll_errors"], r["series"], f"{r['bytes']:,}",
                         r["job_series"], sum(v for k, v in done.items()
                                              if k.startswith("advisory_handover")),
                         losses_n, sum(v for k, v in done.items()
                                       if k.startswith("lease_handover")),
                         done.get("job_done|jobs", 0), r["load"]))
    traffic = [r for r in rows if r["phase"] == "traffic"]
    idle_b = [r for r in rows if r["phase"] == "idle-before"]
    idle_a = [r for r in rows if r["phase"] == "idle-after"]
    k = min(5, max(1, len(traffic) // 2))
    first, last = per_poll(traffic[:k], "sched_ms"), per_poll(traffic[-k:], "sched_ms")
    tfirst, tlast = per_poll(traffic[:k], "cpu_ms"), per_poll(traffic[-k:], "cpu_ms")
    tib, tia = per_poll(idle_b, "cpu_ms"), per_poll(idle_a, "cpu_ms")
    bfirst, blast = per_poll(traffic[:k], "backend_ms"), per_poll(traffic[-k:], "backend_ms")
    ib, ia = per_poll(idle_b, "sched_ms"), per_poll(idle_a, "sched_ms")
    max_rss = max(rows, key=lambda r: r["rss_kib"])
    max_hwm = max(r["hwm_kib"] for r in rows)
    load_first = statistics.mean(r["load"] for r in traffic[:k])
    load_last = statistics.mean(r["load"] for r in traffic[-k:])
    jobs_done = inj.get("job_done|jobs", 0)
    verdict = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    lines += ["", "## Summary", "",
              "| figure | measured | goal |", "|---|---|---|",
              "| exporter CPU per poll, first %d vs last %d traffic minutes | %.2f → %.2f ms "
              "(**%.2fx**; utime+stime %.2fx; load average %.2f → %.2f) | ≤ 1.2x: %s |" % (
                  k, k, first, last, ratio(last, first), ratio(tlast, tfirst), load_first,
                  load_last, verdict(ratio(last, first) <= 1.2)),
              "| its backend's CPU per poll, same minutes | %.2f → %.2f ms (%.2fx) | |" % (
                  bfirst, blast, ratio(blast, bfirst)),
              "| largest VmRSS at a minute's end | **%.1f MiB** (%s minute %d); peak (VmHWM) "
              "%.1f MiB | ≤ 24 MiB: %s |" % (
                  max_rss["rss_kib"] / 1024, max_rss["phase"], max_rss["minute"], max_hwm / 1024,
                  verdict(max(max_rss["rss_kib"], max_hwm) <= 24 * 1024)),
              "| idle CPU per poll, before vs after the traffic | %.2f → %.2f ms (**%.2fx**; "
              "utime+stime %.2fx) | back to before |" % (ib, ia, ratio(ia, ib), ratio(tia, tib)),
              "| idle minor page faults per poll, before vs after | %s | |" % (
                  "%.0f → %.0f" % (per_poll(idle_b, "faults"), per_poll(idle_a, "faults"))
                  if all("faults" in r for r in idle_b + idle_a) else "not recorded"),
              "| idle RSS, end of before vs end of after | %.1f → %.1f MiB | |" % (
                  idle_b[-1]["rss_kib"] / 1024, idle_a[-1]["rss_kib"] / 1024),
              "| /metrics series: end of idle before, traffic minute 1, last traffic minute, "
              "end | %d, %d, %d, %d (job queue: %d, %d, %d, %d) | flat once bounded |" % (
                  idle_b[-1]["series"], traffic[0]["series"], traffic[-1]["series"],
                  idle_a[-1]["series"], idle_b[-1]["job_series"], traffic[0]["job_series"],
                  traffic[-1]["job_series"], idle_a[-1]["job_series"]),
              "| /metrics bytes, same points | %s | |" % ", ".join(
                  f"{x:,}" for x in (idle_b[-1]["bytes"], traffic[0]["bytes"],
                                     traffic[-1]["bytes"], idle_a[-1]["bytes"])),
              "| polls, poll errors | %d, %d | |" % (sum(r["polls"] for r in rows),
                                                     sum(r["poll_errors"] for r in rows)),
              "| jobs finished | %s over %d minutes | thousands |" % (f"{jobs_done:,}",
                                                                      len(traffic)),
              ]
    ir = d.get("instructions") or {}
    if ir:
        per = {k: ratio(v["ir"], v["polls"]) / 1e3 for k, v in ir.items()}
        lines += ["| exporter instructions per poll (callgrind, every thread), idle before, "
                  "traffic, idle after | %s (after ÷ before **%.2fx**) | back to before |" % (
                      ", ".join("%.0f k" % per.get(k, float("nan"))
                                for k in ("idle-before", "traffic", "idle-after")),
                      ratio(per.get("idle-after", 0), per.get("idle-before", 0)))]
    fb, ft, fe = (d[k]["series_by_family"] for k in ("metrics_before", "metrics_traffic_end",
                                                      "metrics_end"))
    changed = sorted(n for n in set(fb) | set(ft) | set(fe)
                     if not fb.get(n, 0) == ft.get(n, 0) == fe.get(n, 0))
    lines += ["", "Series by family where they differ (end of idle before → last traffic minute → "
              "end): " + ("; ".join("`%s` %d → %d → %d" % (n, fb.get(n, 0), ft.get(n, 0),
                                                           fe.get(n, 0)) for n in changed)
                          or "none") + "."]
    lines += ["", "## Events: what the workload did and what the exporter recorded", "",
              "Exporter figures are its counters at the end of the idle minutes after the "
              "traffic (every judgement made), from zero: none of these series had a non-zero "
              "value at the end of the idle minutes before it.", "",
              "| event | workload | exporter | |", "|---|---:|---:|---|"]
    mismatches = []

    def row(label, want, got, note="", exact=True):
        ok = (want == got) if exact else None
        if exact and not ok:
            mismatches.append("%s: workload %s, exporter %s" % (label, fmt(want), fmt(got)))
        mark = note or ("match" if ok else ("**mismatch**" if exact else ""))
        lines.append("| %s | %s | %s | %s |" % (label, fmt(want), fmt(got), mark))

    for lock in HANDOVER_LOCKS:
        row("advisory hand-overs, `%s`" % lock, inj.get("advisory_handover|" + lock, 0),
            total(m_end, "pglock_advisory_lock_handovers_total", lock=lock))
    terminated = inj.get("advisory_loss_terminated|" + LOSS_LOCK, 0)
    iit = inj.get("advisory_loss_idle_in_transaction_timeout|" + LOSS_LOCK, 0)
    row("losses `%s`, terminated" % LOSS_LOCK, terminated,
        total(m_end, "pglock_advisory_lock_losses_total", lock=LOSS_LOCK, cause="terminated"))
    row("losses `%s`, idle_in_transaction_timeout" % LOSS_LOCK, iit,
        total(m_end, "pglock_advisory_lock_losses_total", lock=LOSS_LOCK,
              cause="idle_in_transaction_timeout"))
    all_losses = total(m_end, "pglock_advisory_lock_losses_total")
    row("losses, every lock and cause", terminated + iit, all_losses)
    ev = d["events"]
    log_losses = sum(v for k, v in ev.items() if k.startswith("lock_lost|")
                     and k.split("|")[2] == "log")
    kept_losses = sum(v for k, v in ev.items() if k.startswith("lock_lost|"))
    row("losses with evidence `log` (`/api/v1/events`)", terminated + iit, log_losses,
        "" if kept_losses == log_losses else "of %d lock_lost events kept" % kept_losses)
    row("takeovers `%s`" % LOSS_LOCK, inj.get("advisory_takeover|" + LOSS_LOCK, 0),
        total(m_end, "pglock_advisory_lock_takeovers_total", lock=LOSS_LOCK))
    row("takeovers, every lock", inj.get("advisory_takeover|" + LOSS_LOCK, 0),
        total(m_end, "pglock_advisory_lock_takeovers_total"))
    row("losses and takeovers of `%s` (job_loop.py: unlock, clean close, transaction lock)"
        % JOB_LOOP_LOCK, 0,
        total(m_end, "pglock_advisory_lock_losses_total", lock=JOB_LOOP_LOCK)
        + total(m_end, "pglock_advisory_lock_takeovers_total", lock=JOB_LOOP_LOCK))
    jl_rel = total(m_end, "pglock_advisory_lock_releases_total", lock=JOB_LOOP_LOCK)
    jl_hand = total(m_end, "pglock_advisory_lock_handovers_total", lock=JOB_LOOP_LOCK)
    lines.append("| `%s` jobs; releases and hand-overs the exporter saw | %s | %s; %s | a job "
                 "starts every second and holds 0.4-0.9 s: how many the 1 s polls see depends on "
                 "the phase between the two |" % (
                     JOB_LOOP_LOCK, "; ".join(d["job_loop"][-1:]) or "?", fmt(jl_rel),
                     fmt(jl_hand)))
    for lease in CYCLE_LEASES:
        row("lease hand-overs, `%s` (lease_cycle.py, 3 s)" % lease,
            inj.get("lease_handover|" + lease, 0),
            total(m_end, "pglock_lease_transitions_total", table="leases", lease=lease,
                  kind="handover"))
    row("lease renewals, `%s`" % RENEWED_LEASE, inj.get("lease_renewed|" + RENEWED_LEASE, 0),
        total(m_end, "pglock_lease_transitions_total", table="leases", lease=RENEWED_LEASE,
              kind="renewed"))
    row("lease expired takeovers, `%s`" % EXPIRING_LEASE,
        inj.get("lease_expired_takeover|" + EXPIRING_LEASE, 0),
        total(m_end, "pglock_lease_transitions_total", table="leases", kind="expired_takeover"))
    row("lease overlaps", 0, total(m_end, "pglock_lease_transitions_total", table="leases",
                                   kind="overlap"))
    acquired = total(m_end, "pglock_queue_transitions_total", table="jobs", kind="acquired")
    released = total(m_end, "pglock_queue_transitions_total", table="jobs", kind="released")
    lines.append("| jobs finished; queue `acquired` / `released` | %s | %s / %s | %.0f%% of the "
                 "jobs seen held by a poll (a job is held 0.3-1.2 s) |" % (
                     fmt(jobs_done), fmt(acquired), fmt(released),
                     100 * ratio(released, jobs_done)))
    row("deadlocks (`pglock_deadlocks_total`)", inj.get("deadlock|advisory", 0),
        total(m_end, "pglock_deadlocks_total") - total(m_before, "pglock_deadlocks_total"))
    row("deadlock events from the log", inj.get("deadlock|advisory", 0),
        sum(v for k, v in ev.items() if k.startswith("deadlock|")))
    # Episodes the workload planned: its idle-in-transaction losses (root_ended, on LOSS_LOCK) and
    # the accounts rows (released, on a transactionid). Others are real too: a deadlock's 1 s
    # wait, a job_loop.py job that waits for the one before it, a hand-over's millisecond wait,
    # whenever a poll sees them.
    for outcome, want, lock in (("root_ended", inj.get("blocking_episode_root_ended|" + LOSS_LOCK,
                                                       0), LOSS_LOCK),
                                ("released", inj.get("blocking_episode_released|accounts", 0),
                                 "transactionid")):
        got = total(m_end, "pglock_blocking_episodes_total", outcome=outcome)
        kept = {k.split("|")[3]: v for k, v in ev.items() if k.startswith("blocking_episode|")
                and (k.split("|")[1] == "") == (outcome == "released")}
        if any(kept):  # the events name each episode's lock: the planned ones must all be there
            planned = kept.get(lock, 0)
            extra = ", ".join("%s %s" % (n, fmt(v)) for n, v in sorted(kept.items()) if n != lock)
            row("blocking episodes, `%s`, on `%s`" % (outcome, lock), want, planned)
            lines.append("| blocking episodes, `%s`, on other locks (not planned) | | %s | %s |" % (
                outcome, fmt(got - planned), extra or ""))
        else:
            row("blocking episodes, `%s`" % outcome, want, got,
                "match" if got == want else "%+d not planned by the workload: see the exporter's "
                "log (deadlocks' 1 s waits, a job_loop.py job waiting for the one before it, a "
                "hand-over's millisecond wait, when a poll sees them)" % (got - want), exact=False)
    lines.append("| blocking episodes, `waiters_left` | 0 | %s | |" % fmt(
        total(m_end, "pglock_blocking_episodes_total", outcome="waiters_left")))
    lines.append("| lock waits logged past deadlock_timeout | | %s | |" % fmt(
        total(m_end, "pglock_logged_lock_waits_total")))
    lines += ["", "**Mismatches:** " + ("; ".join(mismatches) if mismatches else "none") + "."]
    if d["workload_errors"]:
        lines += ["", "**Workload errors:** " + "; ".join(d["workload_errors"])]
    if d["job_loop_exit"]:
        lines += ["", "**job_loop.py exited %s:** %s" % (d["job_loop_exit"],
                                                        " / ".join(d["job_loop"]))]
    lines += ["", "Events kept by the exporter at the end (`/api/v1/events`, by kind, cause and "
              "evidence; at most `web.event_log_size` of each kind): " + summarize_kinds(ev) + ".",
              "", "The workers wound down in %.0f s after the last traffic minute; the idle "
              "minutes after it began 15 s later." % d["wind_down_s"]]
    print("\n".join(lines))


def summarize_kinds(ev):
    by = {}
    for k, v in ev.items():
        kind, cause, evidence, _ = k.split("|")
        label = kind + (" " + cause if cause else "") + (" (" + evidence + ")" if evidence else "")
        by[label] = by.get(label, 0) + v
    return ", ".join("%s %s" % (k, fmt(v)) for k, v in sorted(by.items()))


def fmt(x):
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    return f"{x:,}" if isinstance(x, int) else str(x)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    for k in ("url", "psql", "events-log", "json"):
        r.add_argument("--" + k, required=True)
    r.add_argument("--pid", type=int, required=True)
    r.add_argument("--interval", type=float, default=1)
    r.add_argument("--minutes", type=int, default=30)
    r.add_argument("--idle", type=int, default=3)
    r.add_argument("--warmup", type=float, default=30)
    r.add_argument("--callgrind-out", default="")
    rp = sub.add_parser("report")
    rp.add_argument("--json", required=True)
    rp.add_argument("--header", required=True)
    a = p.parse_args()
    {"run": run, "report": report}[a.cmd](a)


if __name__ == "__main__":
    main()
