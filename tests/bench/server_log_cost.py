#!/usr/bin/env python3
"""Side by side: an exporter reading a jsonlog that grows at --rate records/s, and one without a
log, on the same PostgreSQL (PGHOST/PGPORT). Reports each one's CPU over --seconds, then the
reading exporter's resident size after a burst of --burst-mb of log holding one --big-mb record.
Called by tests/bench/server_log_cost.sh."""
import argparse
import json
import os
import random
import re
import socket
import subprocess
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def metric(port, name):
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    m = re.search(r"^" + re.escape(name) + r"(\{[^}]*\})? (\S+)$", body, re.M)
    return float(m.group(2)) if m else None


def record(i, size=0):
    """A jsonlog line like PostgreSQL 16 writes: disconnections, errors, statements."""
    pid = 10000 + i % 5000
    kind = i % 4
    msg = {
        0: "disconnection: session time: 0:00:01.234 user=app database=shop host=10.0.0.7 port=5432",
        1: "duplicate key value violates unique constraint \"orders_pkey\"",
        2: "connection authorized: user=app database=shop application_name=worker",
        3: "checkpoint complete: wrote 12 buffers (0.1%)",
    }[kind]
    if size:
        msg = "x" * size
    rec = {
        "timestamp": time.strftime("%Y-%m-%d %H:%M:%S.000 UTC", time.gmtime()),
        "user": "app", "dbname": "shop", "pid": pid, "remote_host": "10.0.0.7",
        "remote_port": 40000 + i % 1000, "session_id": "%x.%x" % (1700000000 + i // 5000, pid),
        "line_num": i, "ps": "idle", "session_start": "2024-05-01 12:00:00 UTC",
        "vxid": "3/%d" % i, "txid": 0, "error_severity": "ERROR" if kind == 1 else "LOG",
        "state_code": "23505" if kind == 1 else "00000", "message": msg,
        "application_name": "worker", "backend_type": "client backend", "query_id": 0,
    }
    return json.dumps(rec) + "\n"


def start(binary, d, name, with_log, logdir):
    port = free_port()
    conf = os.path.join(d, f"{name}.toml")
    dsn = f"host={os.environ['PGHOST']} port={os.environ['PGPORT']} user=postgres dbname=postgres"
    text = f'[web]\nlisten_address = "127.0.0.1:{port}"\n[poll]\ninterval = "5s"\n' \
           f'[[targets]]\nname = "{name}"\ndsn = "{dsn}"\n'
    if with_log:
        text += f'[targets.server_log]\npath = "{logdir}"\nformat = "jsonlog"\n'
    open(conf, "w").write(text)
    p = subprocess.Popen([binary, f"--config.file={conf}", "--log.level=warn"],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, f"{name}.log"), "w"))
    for _ in range(100):
        try:
            if metric(port, "pglock_up") == 1:
                return p, port
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{name} did not come up")


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--binary", required=True)
    a.add_argument("--dir", required=True)
    a.add_argument("--rate", type=int, default=1000)
    a.add_argument("--seconds", type=int, default=60)
    a.add_argument("--burst-mb", type=int, default=1024)
    a.add_argument("--big-mb", type=int, default=64)
    o = a.parse_args()
    logdir = os.path.join(o.dir, "synthlog")
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, "postgresql-bench.json")
    open(path, "w").close()
    reading, rport = start(o.binary, o.dir, "with_log", True, logdir)
    plain, pport = start(o.binary, o.dir, "without_log", False, logdir)
    time.sleep(3)
    c0 = {p.pid: cpu_seconds(p.pid) for p in (reading, plain)}
    t0 = time.monotonic()
    i = 0
    with open(path, "a") as f:
        while time.monotonic() - t0 < o.seconds:
            due = int((time.monotonic() - t0) * o.rate)
            while i < due:
                f.write(record(i))
                i += 1
            f.flush()
            time.sleep(0.01)
    elapsed = time.monotonic() - t0
    time.sleep(2)
    cpu = {p.pid: (cpu_seconds(p.pid) - c0[p.pid]) / elapsed for p in (reading, plain)}
    read = metric(rport, "pglock_server_log_records_total")
    print(f"steady: {i} records written in {elapsed:.1f} s ({i / elapsed:.0f}/s), {read:.0f} read")
    print(f"  exporter reading the log: {100 * cpu[reading.pid]:.2f} % of a core")
    print(f"  exporter without a log:   {100 * cpu[plain.pid]:.2f} % of a core")
    print(f"  added by the log: {100 * (cpu[reading.pid] - cpu[plain.pid]):.2f} % of a core "
          f"(ratio {cpu[reading.pid] / max(cpu[plain.pid], 1e-9):.2f}x)")
    rss_before = status_kb(reading.pid, "VmRSS")
    written = 0
    line = record(1)
    big_at = o.burst_mb * (1 << 20) // 2
    with open(path, "a") as f:
        while written < o.burst_mb * (1 << 20):
            if big_at is not None and written >= big_at:
                f.write(record(2, o.big_mb * (1 << 20)))
                written += o.big_mb * (1 << 20)
                big_at = None
            chunk = line * 4096
            f.write(chunk)
            written += len(chunk)
    t1 = time.monotonic()
    last, still = None, 0
    while time.monotonic() - t1 < 300 and still < 5:
        time.sleep(1)
        now = metric(rport, "pglock_server_log_records_total")
        still = still + 1 if now == last else 0
        last = now
    print(f"burst: {written / (1 << 20):.0f} MB with one {o.big_mb} MB record, read in about "
          f"{time.monotonic() - t1 - still:.0f} s; unparsed "
          f"{metric(rport, 'pglock_server_log_unparsed_total'):.0f}")
    print(f"  resident: {rss_before / 1024:.1f} MB before, {status_kb(reading.pid, 'VmRSS') / 1024:.1f} MB "
          f"after, peak {status_kb(reading.pid, 'VmHWM') / 1024:.1f} MB; without a log "
          f"{status_kb(plain.pid, 'VmRSS') / 1024:.1f} MB")
    for p in (reading, plain):
        p.terminate()
        p.wait(10)


if __name__ == "__main__":
    main()
