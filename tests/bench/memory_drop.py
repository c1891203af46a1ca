#!/usr/bin/env python3
"""Resident size of several exporters side by side while the held locks rise and fall.

Run by tests/bench/memory_drop.sh, which starts the server and passes PGHOST/PGPORT. Every
exporter runs at once against the same server (inventory polls every --interval-ms, polls offset so
that no two overlap), each as a role of its own. Phases, each sampled every --sample seconds:

  15k    one session holds 15,000 advisory locks
  20k    a second session takes 5,000 more
  80k    three more sessions take 20,000 each
  drop   those three close: 20,000 again

VmRSS of every exporter at every sample, and its CPU (user+system of all its threads) per poll
since the sample before, go to stdout as a Markdown table, one row per sample.
--variant NAME=PATH names an exporter; --env NAME:KEY=VALUE sets an environment variable for it
(LD_PRELOAD, MALLOC_CONF, GLIBC_TUNABLES: one binary, several allocator policies).
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time


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


def advisory_held():
    return int(psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"))


def wait_held(want, seconds=120):
    end = time.time() + seconds
    while time.time() < end:
        if advisory_held() == want:
            return
        time.sleep(0.2)
    sys.exit(f"timed out waiting for {want} held advisory locks")


def take(first, n):
    s = Session()
    s.send(f"SELECT count(pg_advisory_lock(k)) FROM generate_series({first}, {first + n - 1}) k")
    return s


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_ns(pid):
    """User+system nanoseconds of every thread of pid (schedstat's first field)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--env", action="append", default=[], metavar="NAME:KEY=VALUE")
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--sample", type=float, default=10)
    ap.add_argument("--steady", type=int, default=4, help="samples per steady phase")
    ap.add_argument("--after", type=int, default=9, help="samples after the drop")
    args = ap.parse_args()
    variants = [tuple(v.split("=", 1)) for v in args.variant]
    envs = {name: dict(os.environ) for name, _ in variants}
    for spec in args.env:
        name, kv = spec.split(":", 1)
        key, value = kv.split("=", 1)
        envs[name][key] = value
    dsn = f"host=127.0.0.1 port={os.environ['PGPORT']} dbname=postgres"
    for i in range(len(variants)):
        psql(f"DROP ROLE IF EXISTS bench_{i}; CREATE ROLE bench_{i} LOGIN SUPERUSER")

    base = take(1, 15000)
    wait_held(15000)
    procs = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for i, (name, path) in enumerate(variants):
                port = free_port()
                config = os.path.join(tmp, f"{name}.toml")
                with open(config, "w") as f:
                    f.write(f'[web]\nlisten_address = "127.0.0.1:{port}"\n'
                            f'[poll]\ninterval = "{args.interval_ms}ms"\n'
                            f'timeout = "{args.interval_ms - 100}ms"\ninventory_interval = "0s"\n'
                            f'[[targets]]\nname = "bench"\ndsn = "{dsn} user=bench_{i}"\n')
                procs[name] = subprocess.Popen([path, f"--config.file={config}",
                                                "--log.level=warn"], env=envs[name])
                time.sleep(args.interval_ms / 1000 / len(variants))
            print("| phase | s | " + " | ".join(f"{n} MB" for n, _ in variants) + " | " +
                  " | ".join(f"{n} CPU ms/poll" for n, _ in variants) + " |")
            print("|---" * (2 + 2 * len(variants)) + "|")
            t0 = time.time()
            cpu = {name: cpu_ns(p.pid) for name, p in procs.items()}

            def sample(phase, n):
                for _ in range(n):
                    time.sleep(args.sample)
                    for name, p in procs.items():
                        if p.poll() is not None:
                            sys.exit(f"{name} exited with {p.returncode}")
                    polls = args.sample * 1000 / args.interval_ms
                    used = {}
                    for name, p in procs.items():
                        now = cpu_ns(p.pid)
                        used[name] = (now - cpu[name]) / polls / 1e6
                        cpu[name] = now
                    print(f"| {phase} | {time.time() - t0:.0f} | " +
                          " | ".join(f"{rss_mb(p.pid):.1f}" for p in procs.values()) + " | " +
                          " | ".join(f"{used[n]:.1f}" for n in procs) + " |", flush=True)

            sample("15k", args.steady)
            more = take(100001, 5000)
            wait_held(20000)
            sample("20k", args.steady)
            spike = [take(200001 + i * 20000, 20000) for i in range(3)]
            wait_held(80000)
            sample("80k", args.steady)
            for s in spike:
                s.close()
            wait_held(20000)
            sample("drop", args.after)
            more.close()
            base.close()
        finally:
            for p in procs.values():
                p.terminate()
                p.wait(timeout=10)


if __name__ == "__main__":
    main()
