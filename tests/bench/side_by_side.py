#!/usr/bin/env python3
"""Poll cost of several exporter binaries side by side on one running PostgreSQL.

Run by tests/bench/side_by_side.sh, which starts the server and passes PGHOST/PGPORT. For each
scenario (N waiters behind 20k held advisory locks by default) every binary runs at once with the
same config, its polls offset from the others' so that no two polls overlap; each poll's
pglock_poll_duration_seconds is read once, right after it ends. Medians, p90 and the ratio of
each binary to the first one go to stdout as a Markdown table.

Waiters are one third advisory (each on its own key, held by the holder session), one third row
locks (rows updated by a transaction left idle) and one third readers queued behind a table lock
(held by a transaction left idle).

With --cpu, each scenario also measures CPU per poll: after the samples, a window of --cpu-window
seconds with no scrape, over which the user+system time of all the exporter's threads and of its
PostgreSQL backend (/proc/*/schedstat; each binary connects as a role of its own, bench_<i>, so
its backend can be found) is divided by the polls in the window.

--row-lock-table NAME=ROWS gives binary NAME a lock table `bench_mutex` of ROWS rows read as row
locks (row_lock = true); 10 of its rows stay locked FOR UPDATE by a transaction left idle. The other
binaries get no lock table (--plain-lock-table NAME gives NAME the same table as a flag table,
held_sql = "true", which binaries without row_lock can read).

--peer PATH (with --cpu) runs postgres_exporter (Debian's /usr/bin/prometheus-postgres-exporter,
default collectors) next to the binaries, as role postgres_exporter (pg_monitor, as run.sh) with
application_name postgres_exporter. During each CPU window it is scraped (GET /metrics) once per
poll interval, in a slot of its own after the binaries' polls; its process CPU and its backends'
CPU (found by application_name) are divided by the scrapes made in the window, and each binary's
exporter and backend CPU per poll is also given as a ratio to the peer's process and backends CPU
per scrape.

--scrape (with --cpu) adds a second window as long as the first in which every binary is scraped
once per poll, half a slot after its poll starts, with Accept-Encoding: gzip as Prometheus asks:
each such scrape renders and compresses a new snapshot's text. The exporter's CPU per poll in that
window less the unscraped window's is the cost of a scrape; the series and bytes of the plain text
are given beside it.
"""
import argparse
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-U", "postgres",
                           "-d", "postgres", "-c", sql], check=True, capture_output=True,
                          text=True).stdout.strip()


class Session:
    """A psql process kept open: what it took stays held until close()."""

    def __init__(self):
        self.p = subprocess.Popen(["psql", "-X", "-q", "-U", "postgres", "-d", "postgres"],
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)

    def send(self, sql):
        self.p.stdin.write(sql.rstrip().rstrip(";") + ";\n")
        self.p.stdin.flush()

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def wait_for(sql, want, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        if psql(sql) == str(want):
            return
        time.sleep(0.2)
    sys.exit(f"timed out waiting for {sql!r} == {want}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def scrape(port):
    values = {}
    for line in get_metrics(port).splitlines():
        for name in ("pglock_poll_duration_seconds", "pglock_last_poll_success_timestamp_seconds",
                     "pglock_up"):
            if line.startswith(name + "{"):
                values[name] = float(line.rsplit(" ", 1)[1])
    return values


def cpu_ns(pid):
    """User+system nanoseconds of every thread of pid (schedstat's first field); 0 once it is
    gone."""
    total = 0
    task_dir = f"/proc/{pid}/task"
    try:
        tids = os.listdir(task_dir)
    except FileNotFoundError:
        return 0
    for tid in tids:
        try:
            with open(f"{task_dir}/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def backend_pid(user):
    out = psql(f"SELECT pid FROM pg_stat_activity WHERE usename = '{user}' "
               "AND application_name = 'pglock_exporter' ORDER BY backend_start DESC LIMIT 1")
    return int(out) if out else None


def peer_backends():
    out = psql("SELECT pid FROM pg_stat_activity WHERE application_name = 'postgres_exporter'")
    return {int(p) for p in out.split()}


def peer_up(port):
    return "\npg_up 1\n" in get_metrics(port)


def measure_peer(peer, first, interval, end):
    """(process ms per scrape, backends ms per scrape, scrapes): scrapes postgres_exporter
    (Popen, port) once per interval at first + k * interval until end."""
    proc, port = peer
    pids0 = peer_backends()
    proc0, back0 = cpu_ns(proc.pid), {p: cpu_ns(p) for p in pids0}
    scrapes = 0
    t = first + max(0, math.ceil((time.time() - first) / interval)) * interval
    while t < end:
        time.sleep(max(0.0, t - time.time()))
        if not peer_up(port):
            sys.exit("postgres_exporter: pg_up is not 1")
        scrapes += 1
        t += interval
    proc1 = cpu_ns(proc.pid)
    pids1 = peer_backends()
    if pids0 - pids1:
        sys.exit(f"postgres_exporter backends {sorted(pids0 - pids1)} ended in the window: "
                 "their CPU is lost")
    back1 = {p: cpu_ns(p) for p in pids1}  # a backend new in the window counts from 0
    if not scrapes:
        sys.exit("postgres_exporter: no scrape in the CPU window")
    return ((proc1 - proc0) / scrapes / 1e6,
            sum(back1[p] - back0.get(p, 0) for p in pids1) / scrapes / 1e6, scrapes)


def measure_cpu(binaries, procs, ports, interval_ms, window, peer=None, peer_first=0):
    """{name: (exporter ms per poll, backend ms per poll)} over a window in which the exporters are
    not scraped, and postgres_exporter's (process ms, backends ms, scrapes) over the same window,
    scraped once per interval from peer_first on (None without a peer)."""
    start = {}
    for i, (name, _) in enumerate(binaries):
        bpid = backend_pid(f"bench_{i}")
        start[name] = (scrape(ports[name])["pglock_last_poll_success_timestamp_seconds"],
                       cpu_ns(procs[name].pid), bpid, cpu_ns(bpid) if bpid else 0)
    end = time.time() + window
    peer_cpu = measure_peer(peer, peer_first, interval_ms / 1000, end) if peer else None
    time.sleep(max(0.0, end - time.time()))
    out = {}
    for name, _ in binaries:
        last0, exp0, bpid, back0 = start[name]
        exp1, back1 = cpu_ns(procs[name].pid), cpu_ns(bpid) if bpid else 0
        last1 = scrape(ports[name])["pglock_last_poll_success_timestamp_seconds"]
        polls = max(1, round((last1 - last0) * 1000 / interval_ms))
        out[name] = ((exp1 - exp0) / polls / 1e6, (back1 - back0) / polls / 1e6)
    return out, peer_cpu


def scrape_gzip(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                 headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return len(r.read())


def measure_scrapes(binaries, procs, ports, interval_ms, window, first, slot):
    """{name: (exporter ms per poll, scrapes, series, plain bytes)} over a window in which each
    binary is scraped (gzip) once per poll, half a slot after its polls start (first + i * slot +
    k * interval)."""
    interval = interval_ms / 1000
    start = {}
    for name, _ in binaries:
        start[name] = (scrape(ports[name])["pglock_last_poll_success_timestamp_seconds"],
                       cpu_ns(procs[name].pid))
    end = time.time() + window
    scrapes = {n: 0 for n, _ in binaries}
    k = math.ceil((time.time() - first) / interval)
    while True:
        due = [(first + k * interval + i * slot + slot / 2, name)
               for i, (name, _) in enumerate(binaries)]
        if due[-1][0] >= end:
            break
        for t, name in due:
            if t < time.time():
                continue
            time.sleep(t - time.time())
            scrape_gzip(ports[name])
            scrapes[name] += 1
        k += 1
    time.sleep(max(0.0, end - time.time()))
    out = {}
    for name, _ in binaries:
        last0, exp0 = start[name]
        exp1 = cpu_ns(procs[name].pid)
        text = get_metrics(ports[name])
        last1 = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                 if line.startswith("pglock_last_poll_success_timestamp_seconds{")][0]
        polls = max(1, round((last1 - last0) * 1000 / interval_ms))
        series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        out[name] = ((exp1 - exp0) / polls / 1e6, scrapes[name], series, len(text.encode()))
    return out


def table_config(kind):
    if kind == "row_lock":
        return '[[targets.leases]]\ntable = "bench_mutex"\nrow_lock = true\n'
    if kind == "plain":
        return '[[targets.leases]]\ntable = "bench_mutex"\nheld_sql = "true"\n'
    return ""


def run_scenario(binaries, dsn, interval_ms, inventory_interval, samples, tmp, tables=None,
                 cpu_window=0, peer=None, scrapes=False):
    """Returns ({name: [poll seconds]}, ({name: cpu per poll}, peer cpu per scrape or None) or None,
    measure_scrapes' figures or None) for every binary, sampled at once."""
    procs, ports = {}, {}
    tables = tables or {}
    slot = interval_ms / 1000 / (len(binaries) + (1 if peer else 0))  # the peer's slot is last
    first = time.time()
    for i, (name, path) in enumerate(binaries):
        port = free_port()
        config = os.path.join(tmp, f"{name}.toml")
        with open(config, "w") as f:
            f.write(f'[web]\nlisten_address = "127.0.0.1:{port}"\n'
                    f'[poll]\ninterval = "{interval_ms}ms"\ntimeout = "{interval_ms - 100}ms"\n'
                    f'inventory_interval = "{inventory_interval}"\n'
                    f'[[targets]]\nname = "bench"\ndsn = "{dsn} user=bench_{i}"\n' +
                    table_config(tables.get(name)))
        procs[name] = subprocess.Popen([path, f"--config.file={config}", "--log.level=warn"])
        ports[name] = port
        time.sleep(slot)  # offset: polls never overlap
    seen = {n: None for n, _ in binaries}
    got = {n: [] for n, _ in binaries}
    skip = {n: 2 for n, _ in binaries}  # the first polls connect and take the inventory
    try:
        while min(len(v) for v in got.values()) < samples:
            for name, _ in binaries:
                try:
                    m = scrape(ports[name])
                except OSError:
                    continue
                last = m.get("pglock_last_poll_success_timestamp_seconds")
                if last is None or last == seen[name]:
                    continue
                seen[name] = last
                if m.get("pglock_up") != 1:
                    sys.exit(f"{name}: target down")
                if skip[name] > 0:
                    skip[name] -= 1
                    continue
                got[name].append(m["pglock_poll_duration_seconds"])
            time.sleep(interval_ms / 1000 / 10)
        cpu = (measure_cpu(binaries, procs, ports, interval_ms, cpu_window, peer,
                           first + len(binaries) * slot) if cpu_window else None)
        scraped = (measure_scrapes(binaries, procs, ports, interval_ms, cpu_window, first, slot)
                   if cpu_window and scrapes else None)
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
    return got, cpu, scraped


def set_up_waiters(n):
    """Starts n waiters; returns the sessions to close."""
    third = (n + 2) // 3  # keys and rows 1..third: enough for every waiter of a kind
    sessions = []
    if n == 0:
        return sessions
    holder = Session()
    holder.send(f"SELECT count(pg_advisory_lock(k)) FROM generate_series(1, {third}) k")
    rows = Session()
    rows.send("BEGIN")
    rows.send(f"UPDATE bench_rows SET v = v + 1 WHERE id <= {third}")
    table = Session()
    table.send("BEGIN")
    table.send("LOCK TABLE bench_table IN ACCESS EXCLUSIVE MODE")
    sessions += [holder, rows, table]
    wait_for("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid <= "
             f"{third} AND classid = 0 AND granted", third)
    wait_for("SELECT count(*) FROM pg_locks WHERE relation = 'bench_table'::regclass AND granted",
             1)
    for i in range(1, n + 1):
        s = Session()
        kind = (i - 1) % 3
        key = (i - 1) // 3 + 1
        if kind == 0:
            s.send(f"SELECT pg_advisory_lock({key})")
        elif kind == 1:
            s.send(f"UPDATE bench_rows SET v = v WHERE id = {key}")
        else:
            s.send("SELECT count(*) FROM bench_table")
        sessions.append(s)
    wait_for("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'", n)
    return sessions


def start_peer(path, dsn):
    """Starts postgres_exporter; returns (Popen, port) once it reports pg_up 1."""
    port = free_port()
    env = dict(os.environ, DATA_SOURCE_NAME=f"{dsn} user=postgres_exporter sslmode=disable "
               "application_name=postgres_exporter")
    proc = subprocess.Popen([path, f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            env=env)
    end = time.time() + 30
    while time.time() < end:
        try:
            if peer_up(port):
                return proc, port
        except OSError:
            pass
        time.sleep(0.1)
    proc.terminate()
    sys.exit("postgres_exporter does not report pg_up 1")


def cpu_row(mode, n, binaries, cpu, peer_cpu):
    """The CPU row of a scenario: each binary's exporter + backend ms per poll, the peer's process
    + backends ms per scrape and each binary's ratios to it; each binary's total ÷ the first's."""
    row = f"| {mode} | {n} | CPU ms per poll, exporter + backend: " + ", ".join(
        f"{k} {cpu[k][0]:.2f} + {cpu[k][1]:.2f}" for k, _ in binaries)
    if peer_cpu:
        proc, back, scrapes = peer_cpu
        row += (f"; postgres_exporter per scrape ({scrapes} scrapes), process + backends: "
                f"{proc:.2f} + {back:.2f}; ÷ postgres_exporter, exporter and backend: " +
                ", ".join(f"{k} {cpu[k][0] / proc:.2f} and {cpu[k][1] / back:.2f}"
                          for k, _ in binaries))
    return row + " | " + " | ".join(f"{sum(cpu[k]) / sum(cpu[binaries[0][0]]):.2f}"
                                    for k, _ in binaries[1:]) + " |"


def scrape_row(mode, n, binaries, cpu, scraped):
    """Each binary's exporter ms per scrape (a poll with a scrape less one without) and its text;
    each one's ÷ the first's."""
    cost = {k: scraped[k][0] - cpu[k][0] for k, _ in binaries}
    row = f"| {mode} | {n} | exporter ms per scrape after each poll (gzip): " + ", ".join(
        f"{k} {cost[k]:.2f} ({scraped[k][1]} scrapes, {scraped[k][2]} series, "
        f"{scraped[k][3]} bytes)" for k, _ in binaries)
    base = cost[binaries[0][0]]
    return row + " | " + " | ".join(f"{cost[k] / base:.2f}" if base > 0 else "-"
                                    for k, _ in binaries[1:]) + " |"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", action="append", required=True, metavar="NAME=PATH",
                    help="exporter to measure; the first is the baseline of the ratios")
    ap.add_argument("--held", type=int, default=20000)
    ap.add_argument("--waiters", default="0,20,200")
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--modes", default="tiered", help="tiered, full or both (comma-separated)")
    ap.add_argument("--cpu", action="store_true", help="also measure CPU per poll")
    ap.add_argument("--cpu-window", type=float, default=20)
    ap.add_argument("--row-lock-table", action="append", default=[], metavar="NAME=ROWS")
    ap.add_argument("--plain-lock-table", action="append", default=[], metavar="NAME")
    ap.add_argument("--scrape", action="store_true",
                    help="also measure a scrape after every poll (needs --cpu)")
    ap.add_argument("--peer", metavar="PATH",
                    help="postgres_exporter to scrape during the CPU windows (needs --cpu)")
    args = ap.parse_args()
    if (args.peer or args.scrape) and not args.cpu:
        ap.error("--peer and --scrape need --cpu")
    binaries = [tuple(b.split("=", 1)) for b in args.binary]
    dsn = f"host=127.0.0.1 port={os.environ['PGPORT']} dbname=postgres"
    for i in range(len(binaries)):
        psql(f"DROP ROLE IF EXISTS bench_{i}; CREATE ROLE bench_{i} LOGIN SUPERUSER")
    if args.peer:
        psql("DROP ROLE IF EXISTS postgres_exporter; CREATE ROLE postgres_exporter LOGIN; "
             "GRANT pg_monitor TO postgres_exporter")
    tables = {}
    rows = 0
    for spec in args.row_lock_table:
        name, rows = spec.split("=", 1)
        tables[name] = "row_lock"
    for name in args.plain_lock_table:
        tables[name] = "plain"
    mutex_holder = None
    if tables:
        rows = int(rows) or 1000
        psql("DROP TABLE IF EXISTS bench_mutex; "
             "CREATE TABLE bench_mutex (name text PRIMARY KEY, note text); "
             f"INSERT INTO bench_mutex SELECT 'mutex-' || g, '' FROM generate_series(1, {rows}) g")
        mutex_holder = Session()
        mutex_holder.send("BEGIN")
        mutex_holder.send("SELECT count(*) FROM (SELECT 1 FROM bench_mutex ORDER BY name "
                          "LIMIT 10 FOR UPDATE) x")

    psql("CREATE TABLE IF NOT EXISTS bench_rows (id int PRIMARY KEY, v int); "
         "CREATE TABLE IF NOT EXISTS bench_table (id int); TRUNCATE bench_rows; "
         "INSERT INTO bench_rows SELECT g, 0 FROM generate_series(1, 1000) g")
    held = Session()
    held.send(f"SELECT count(pg_advisory_lock(1000000000 + k)) "
              f"FROM generate_series(1, {args.held}) k")
    wait_for("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted",
             args.held)
    print(f"| mode | waiters | " + " | ".join(f"{n} median ms (p90)" for n, _ in binaries) +
          " | " + " | ".join(f"{n} / {binaries[0][0]}" for n, _ in binaries[1:]) + " |")
    print("|---" * (2 + 2 * len(binaries) - 1) + "|")
    peer = start_peer(args.peer, dsn) if args.peer else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in [int(x) for x in args.waiters.split(",")]:
                sessions = set_up_waiters(n)
                for mode in args.modes.split(","):
                    got, cpu, scraped = run_scenario(
                        binaries, dsn, args.interval_ms, "60s" if mode == "tiered" else "0s",
                        args.samples, tmp, tables, args.cpu_window if args.cpu else 0, peer,
                        args.scrape)
                    med = {k: statistics.median(v) * 1000 for k, v in got.items()}
                    p90 = {k: statistics.quantiles(v, n=10)[-1] * 1000 for k, v in got.items()}
                    base = med[binaries[0][0]]
                    print(f"| {mode} | {n} | " +
                          " | ".join(f"{med[k]:.2f} ({p90[k]:.2f})" for k, _ in binaries) +
                          " | " + " | ".join(f"{med[k] / base:.2f}" for k, _ in binaries[1:]) +
                          " |", flush=True)
                    if cpu:
                        print(cpu_row(mode, n, binaries, *cpu), flush=True)
                    if scraped:
                        print(scrape_row(mode, n, binaries, cpu[0], scraped), flush=True)
                for s in sessions:  # holders first: a waiting psql reads no EOF
                    s.close()
                wait_for("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
                         0)
    finally:
        if peer:
            peer[0].terminate()
            peer[0].wait(timeout=10)
    held.close()
    if mutex_holder:
        mutex_holder.close()


if __name__ == "__main__":
    main()
