#!/usr/bin/env python3
"""Measurements of tests/bench/fleet.sh: one exporter polling many PostgreSQL servers.

  fleet.py measure --url URL --pid PID --name NAME --targets N --interval S --window S
                   --scrapes N --out JSON
                   [--stop-target T --stop-cmd CMD --pause-target T --pause-pidfile FILE
                    --paused-list FILE --fault-seconds S]
      Measures one running exporter and writes one JSON record:
        1. waits until every target is up: resident size, peak and threads then ("start"), and
           with --backend-cmd (a shell command printing the pid of the exporter's backend) the
           CPU that backend has used so far: what a target's first session costs its server;
        2. after two more intervals, a window of S seconds with no scrape: the process's
           utime+stime (/proc/PID/stat; schedstat beside it) over it, and the polls made in it,
           counted per target from pglock_last_poll_success_timestamp_seconds read just before
           and just after;
        3. N sequential curl scrapes of /metrics, plain, then N with Accept-Encoding: gzip;
        4. with the fault options, 30 s of healthy sampling, then the fault: CMD stops target T's
           server and the postmaster of FILE with all its children gets SIGSTOP (pids written to
           --paused-list so that the caller's trap can resume them); every second, the age of the
           last successful poll of every other target and pglock_up of both; SIGCONT after S
           seconds, then sampling until the paused target is up again;
        5. resident size, peak, threads and the CPU of the whole run ("after").
  fleet.py cold --url URL --pid PID --name NAME --targets N --interval S --seconds S --out JSON
      Every target in the config from the process's start: the number up once a second until all
      are up or S seconds have passed; prints all-up or partial.
  fleet.py report --json FILE... [--cold FILE...] --header TEXT
      Prints the Markdown report of the records (a 1-target record per interval is the baseline
      that per-target figures subtract).
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")
TARGET = re.compile(r'target="([^"]*)"')


# --- the exporter process ------------------------------------------------------------------------

def cpu_seconds(pid):
    """utime + stime of every thread of the process, ended ones included (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # fields 14 and 15 of proc(5)


def minor_faults(pid):
    """Minor page faults of every thread of the process, ended ones included (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[7])  # field 10 of proc(5)


def run_seconds(pid):
    """Seconds since the process started (field 22 of /proc/PID/stat against /proc/uptime)."""
    with open(f"/proc/{pid}/stat") as f:
        start = int(f.read().rpartition(")")[2].split()[19]) / TICK
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) - start


def schedstat_seconds(pid):
    """Run time of the live threads in nanoseconds (/proc/PID/task/*/schedstat): a check on the
    10 ms ticks of utime+stime when a window holds only a few milliseconds of CPU."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total / 1e9


def status(pid):
    """VmRSS and VmHWM in KiB, and Threads, from /proc/PID/status."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
    return out


# --- /metrics ------------------------------------------------------------------------------------

def scrape(url, timeout=10):
    """{metric: {target: value}} of one plain scrape, and the wall time when it was read."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body = r.read().decode()
    at = time.time()
    out = {}
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name = head.partition("{")[0]
        m = TARGET.search(head)
        if m and name in ("pglock_up", "pglock_last_poll_success_timestamp_seconds",
                          "pglock_poll_errors_total", "pglock_poll_duration_seconds"):
            out.setdefault(name, {})[m.group(1)] = float(value)
    return out, at


def curl_scrapes(url, n, gzip):
    """(seconds of each scrape, bytes of the last, its Content-Encoding) of n sequential curls."""
    cmd = ["curl", "-sS", "-o", "/dev/null", "-w",
           "%{time_total} %{size_download} %header{content-encoding}\n", url]
    if gzip:
        cmd[1:1] = ["-H", "Accept-Encoding: gzip"]
    times, size, encoding = [], 0, ""
    for _ in range(n):
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
        times.append(float(out[0]))
        size, encoding = int(out[1]), (out[2] if len(out) > 2 else "")
    return times, size, encoding


def series_count(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read().decode()
    return sum(1 for line in body.splitlines() if line and not line.startswith("#"))


# --- the phases ----------------------------------------------------------------------------------

def up_count(url):
    try:
        m, _ = scrape(url)
    except OSError:
        return 0  # not listening yet
    return sum(1 for v in m.get("pglock_up", {}).values() if v == 1)


def cold(a):
    """Every target configured from the start: the count up and the sum of poll errors once a
    second from the process's start, until all are up or `seconds` have passed. Prints all-up or
    partial."""
    samples = []
    while True:
        t = run_seconds(a.pid)
        try:
            m, _ = scrape(a.url)
        except OSError:
            m = {}  # not listening yet
        up = sum(1 for v in m.get("pglock_up", {}).values() if v == 1)
        samples.append([t, up, sum(m.get("pglock_poll_errors_total", {}).values())])
        if up >= a.targets or t >= a.seconds:
            break
        time.sleep(max(0.0, 1 - (run_seconds(a.pid) - t)))
    with open(a.out, "w") as f:
        json.dump({"name": a.name, "targets": a.targets, "interval": a.interval,
                   "samples": samples}, f)
    print("all-up" if samples[-1][1] >= a.targets else "partial")


def wait_all_up(a):
    deadline = time.time() + 180
    while True:
        up = up_count(a.url)
        if up >= a.targets:
            return
        if time.time() > deadline:
            sys.exit(f"{a.name}: only {up} of {a.targets} targets up after 180 s")
        time.sleep(0.5)


def quiet_window(a):
    """CPU and polls over a window with no scrape: the cost of polling alone."""
    before, _ = scrape(a.url)
    c0, s0, t0 = cpu_seconds(a.pid), schedstat_seconds(a.pid), time.monotonic()
    time.sleep(a.window)
    c1, s1, t1 = cpu_seconds(a.pid), schedstat_seconds(a.pid), time.monotonic()
    after, _ = scrape(a.url)
    ts0 = before["pglock_last_poll_success_timestamp_seconds"]
    ts1 = after["pglock_last_poll_success_timestamp_seconds"]
    # A poll starts one interval after the previous one started, so the last success advances by
    # whole intervals: their number is the polls that succeeded in between.
    polls = sum(round((ts1[t] - ts0[t]) / a.interval) for t in ts1)
    errors = sum(after["pglock_poll_errors_total"].values()) - sum(
        before["pglock_poll_errors_total"].values())
    durations = list(after["pglock_poll_duration_seconds"].values())
    return {"cpu_s": c1 - c0, "schedstat_s": s1 - s0, "seconds": t1 - t0, "polls": polls,
            "poll_errors": errors,
            "expected_polls": a.targets * (t1 - t0) / a.interval,
            "poll_ms_median": statistics.median(durations) * 1000,
            "poll_ms_max": max(durations) * 1000}


def scrapes(a):
    plain, plain_bytes, _ = curl_scrapes(a.url, a.scrapes, gzip=False)
    gz, gz_bytes, encoding = curl_scrapes(a.url, a.scrapes, gzip=True)
    if encoding != "gzip":
        sys.exit(f"{a.name}: Accept-Encoding: gzip answered with {encoding or 'no'} encoding")
    return {"series": series_count(a.url), "bytes": plain_bytes, "gzip_bytes": gz_bytes,
            "plain_ms": [t * 1000 for t in plain], "gzip_ms": [t * 1000 for t in gz]}


def sample_ages(a, healthy, seconds, until=None):
    """One scrape a second for `seconds` (or until `until(metrics)`): per sample, the oldest last
    success among the healthy targets, and the up and age of the faulted ones."""
    out, start = [], time.monotonic()
    while time.monotonic() - start < seconds:
        tick = time.monotonic()
        t0 = time.time()
        m, at = scrape(a.url)
        ts, up = m["pglock_last_poll_success_timestamp_seconds"], m["pglock_up"]
        ages = {t: at - ts.get(t, 0) for t in healthy}
        worst = max(ages, key=ages.get)
        out.append({"t": tick - start, "max_age": ages[worst], "worst": worst,
                    "scrape_ms": (at - t0) * 1000,
                    "healthy_down": sum(1 for t in healthy if up.get(t) != 1),
                    "healthy_poll_max_ms": max(m["pglock_poll_duration_seconds"].get(t, 0)
                                               for t in healthy) * 1000,
                    "stopped_up": up.get(a.stop_target), "paused_up": up.get(a.pause_target),
                    "paused_age": at - ts.get(a.pause_target, 0),
                    "paused_errors": m["pglock_poll_errors_total"].get(a.pause_target)})
        if until and until(m):
            break
        time.sleep(max(0.0, 1 - (time.monotonic() - tick)))
    return out


def family(pid):
    """pid and its children (a postmaster: its backends and auxiliary processes)."""
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == pid:
                        kids.append(int(entry))
            except OSError:
                pass  # ended meanwhile
    return [pid] + kids


def fault(a, targets):
    healthy = [t for t in targets if t not in (a.stop_target, a.pause_target)]
    calm = sample_ages(a, healthy, 30)
    subprocess.run(a.stop_cmd, shell=True, check=True)
    with open(a.pause_pidfile) as f:
        pids = family(int(f.readline()))
    with open(a.paused_list, "w") as f:
        f.write("\n".join(map(str, pids)) + "\n")
    for p in pids:  # the postmaster first: it forks no new backend once stopped
        os.kill(p, signal.SIGSTOP)
    paused_at = time.monotonic()
    during = sample_ages(a, healthy, a.fault_seconds)
    for p in reversed(pids):
        os.kill(p, signal.SIGCONT)
    resumed_at = time.monotonic()
    after = sample_ages(a, healthy, 120,
                        until=lambda m: m["pglock_up"].get(a.pause_target) == 1)
    return {"healthy": len(healthy), "paused_processes": len(pids),
            "pause_seconds": resumed_at - paused_at, "calm": calm, "during": during,
            "after": after}


def first_session(a):
    """utime+stime of the exporter's backend right after its first polls (connect, prepared
    statements, names, identity, first batch), in ms; None without --backend-cmd."""
    if not a.backend_cmd:
        return None
    out = subprocess.run(a.backend_cmd, shell=True, check=True, capture_output=True, text=True)
    pid = int(out.stdout.split()[0])
    return cpu_seconds(pid) * 1000


def measure(a):
    wait_all_up(a)
    first_session_ms = first_session(a)
    rec = {"name": a.name, "targets": a.targets, "interval": a.interval,
           "started": a.started, "stop_target": a.stop_target, "pause_target": a.pause_target,
           "seconds_to_all_up": run_seconds(a.pid), "first_session_ms": first_session_ms,
           "start": status(a.pid)}
    time.sleep(2 * a.interval)
    rec["window"] = quiet_window(a)
    rec["scrape"] = scrapes(a)
    if a.stop_target:
        targets = list(scrape(a.url)[0]["pglock_up"])
        rec["fault"] = fault(a, targets)
    rec["after"] = status(a.pid)
    rec["run_cpu_s"] = cpu_seconds(a.pid)  # since the process started
    rec["run_seconds"] = run_seconds(a.pid)
    with open(a.out, "w") as f:
        json.dump(rec, f, indent=1)
    print(f"{a.name}: {rec['window']['cpu_s']:.2f} s CPU over {rec['window']['polls']} polls, "
          f"RSS {rec['after']['VmRSS'] / 1024:.1f} MiB, {rec['after']['Threads']} threads")


# --- the report ----------------------------------------------------------------------------------

def mib(kib):
    return kib / 1024


def per_target(rec, base, value):
    """What each target past the first adds: (value(rec) - value(base)) / (targets - 1)."""
    return (value(rec) - value(base)) / (rec["targets"] - base["targets"])


def figures(rec):
    w = rec["window"]
    rounds = w["seconds"] / rec["interval"]
    s = rec["scrape"]
    return {
        "rss_start": mib(rec["start"]["VmRSS"]), "hwm_start": mib(rec["start"]["VmHWM"]),
        "rss_after": mib(rec["after"]["VmRSS"]), "hwm_after": mib(rec["after"]["VmHWM"]),
        "threads": rec["after"]["Threads"],
        "cpu_round_ms": w["cpu_s"] * 1000 / rounds,
        "sched_round_ms": w["schedstat_s"] * 1000 / rounds,
        "cpu_poll_ms": w["cpu_s"] * 1000 / w["polls"],
        "sched_poll_ms": w["schedstat_s"] * 1000 / w["polls"],
        "core_pct": w["cpu_s"] / w["seconds"] * 100,
        "run_core_pct": rec["run_cpu_s"] / rec["run_seconds"] * 100,
        "polls": w["polls"], "expected": w["expected_polls"], "errors": w["poll_errors"],
        "poll_med": w["poll_ms_median"], "poll_max": w["poll_ms_max"],
        "series": s["series"], "bytes": s["bytes"], "gzip": s["gzip_bytes"],
        "plain_med": statistics.median(s["plain_ms"]), "plain_max": max(s["plain_ms"]),
        "gzip_med": statistics.median(s["gzip_ms"]), "gzip_max": max(s["gzip_ms"]),
    }


ROWS = [  # (label, figure key, format)
    ("VmRSS when all targets were first up (MiB)", "rss_start", "{:.1f}"),
    ("VmHWM then (MiB)", "hwm_start", "{:.1f}"),
    ("VmRSS after the run (MiB)", "rss_after", "{:.1f}"),
    ("VmHWM after the run (MiB)", "hwm_after", "{:.1f}"),
    ("threads", "threads", "{}"),
    ("polls in the quiet window (interval arithmetic)", "polls", "{}"),
    ("poll errors in the quiet window", "errors", "{:.0f}"),
    ("poll duration, median / max over targets (ms)", ("poll_med", "poll_max"), "{:.1f} / {:.1f}"),
    ("exporter CPU per poll round, all targets (ms)", "cpu_round_ms", "{:.2f}"),
    ("exporter CPU per target-poll (ms)", "cpu_poll_ms", "{:.3f}"),
    ("the same from schedstat (ns clock, live threads) (ms)", "sched_poll_ms", "{:.3f}"),
    ("% of one core, quiet window", "core_pct", "{:.2f}"),
    ("% of one core, whole run (scrapes and faults included)", "run_core_pct", "{:.2f}"),
    ("/metrics series", "series", "{:,}"),
    ("/metrics bytes, plain / gzip", ("bytes", "gzip"), "{:,} / {:,}"),
    ("scrape time plain, median / max (ms)", ("plain_med", "plain_max"), "{:.2f} / {:.2f}"),
    ("scrape time gzip, median / max (ms)", ("gzip_med", "gzip_max"), "{:.2f} / {:.2f}"),
]

PER_TARGET = [  # (label, figure key, format): (50-target figure - 1-target figure) / 49
    ("VmRSS after the run (MiB)", "rss_after", "{:.3f}"),
    ("VmRSS when all up (MiB)", "rss_start", "{:.3f}"),
    ("VmHWM after the run (MiB)", "hwm_after", "{:.3f}"),
    ("threads", "threads", "{:.2f}"),
    ("exporter CPU per poll round (ms)", "cpu_round_ms", "{:.3f}"),
    ("exporter CPU per poll round, schedstat (ms)", "sched_round_ms", "{:.3f}"),
    ("% of one core, quiet window", "core_pct", "{:.3f}"),
    ("/metrics series", "series", "{:.1f}"),
    ("/metrics bytes, plain / gzip", ("bytes", "gzip"), "{:,.0f} / {:,.0f}"),
]


def cell(f, key, fmt):
    keys = key if isinstance(key, tuple) else (key,)
    return fmt.format(*(f[k] for k in keys))


def main_table(recs):
    figs = [figures(r) for r in recs]
    lines = ["| | " + " | ".join(f"{r['targets']} target{'s' if r['targets'] > 1 else ''}, "
                                 f"{r['interval']:g} s" for r in recs) + " |",
             "|---|" + "---:|" * len(recs)]
    for label, key, fmt in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(f, key, fmt) for f in figs) + " |")
    lines.append("| targets started | " + " | ".join(r["started"] for r in recs) + " |")
    lines.append("| its backend's CPU when first up: connect, prepare, first polls (ms) | " +
                 " | ".join("" if r.get("first_session_ms") is None else
                            f"{r['first_session_ms']:.0f}" for r in recs) + " |")
    lines.append("| seconds from the process's start to every target up | " + " | ".join(
        f"{r['seconds_to_all_up']:.2f}" for r in recs) + " |")
    return lines


def per_target_table(pairs):
    lines = ["| each target past the first | " + " | ".join(
        f"{big['interval']:g} s polls" for big, _ in pairs) + " |", "|---|" + "---:|" * len(pairs)]
    for label, key, fmt in PER_TARGET:
        keys = key if isinstance(key, tuple) else (key,)
        vals = []
        for big, base in pairs:
            fb, f1 = figures(big), figures(base)
            d = [(fb[k] - f1[k]) / (big["targets"] - base["targets"]) for k in keys]
            vals.append(fmt.format(*d))
        lines.append(f"| {label} | " + " | ".join(vals) + " |")
    return lines


def fault_lines(rec):
    f = rec["fault"]
    iv = rec["interval"]
    calm = max(s["max_age"] for s in f["calm"])
    during = f["during"]
    worst = max(during, key=lambda s: s["max_age"])
    first_down = next((s["t"] for s in during if s["paused_up"] == 0), None)
    stopped_down = next((i for i, s in enumerate(during) if s["stopped_up"] == 0), None)
    stayed_down = stopped_down is not None and all(
        s["stopped_up"] == 0 for s in during[stopped_down:])
    healthy_down = max(s["healthy_down"] for s in during + f["after"])
    scrape_max = max(s["scrape_ms"] for s in during)
    poll_max = max(s["healthy_poll_max_ms"] for s in during)
    recovered = f["after"][-1]["t"] if f["after"] and f["after"][-1]["paused_up"] == 1 else None
    ok = worst["max_age"] <= 2 * iv + 0.5 and healthy_down == 0
    return [
        f"- {rec['name']} ({iv:g} s polls): {f['healthy']} healthy targets sampled once a second. "
        f"Oldest last success among them: {calm:.2f} s in the 30 s before the fault, "
        f"**{worst['max_age']:.2f} s** during the {f['pause_seconds']:.0f} s pause "
        f"({worst['max_age'] / iv:.2f} intervals, target {worst['worst']} at "
        f"{worst['t']:.0f} s); healthy targets ever down: {healthy_down}. "
        f"{'Within' if ok else '**Not within**'} 2 intervals.",
        f"  - paused target ({rec_arg(rec, 'pause')}, {f['paused_processes']} processes stopped): "
        f"pglock_up 0 from {fmt_t(first_down)} after the pause; its poll errors "
        f"{errors_during(during)}; up again {fmt_t(recovered)} after SIGCONT.",
        f"  - stopped target ({rec_arg(rec, 'stop')}): pglock_up 0 from "
        f"{fmt_t(None if stopped_down is None else during[stopped_down]['t'])} after the stop"
        f"{', and in every sample after' if stayed_down else ', **not in every sample after**'}.",
        f"  - during the fault, the healthy targets' last polls took at most {poll_max:.1f} ms, "
        f"the sampling scrapes at most {scrape_max:.1f} ms.",
    ]


def rec_arg(rec, which):
    return rec.get(f"{which}_target", "?")


def fmt_t(t):
    return "never" if t is None else f"{t:.0f} s"


def errors_during(samples):
    e = [s["paused_errors"] for s in samples if s["paused_errors"] is not None]
    return f"{e[0]:.0f} → {e[-1]:.0f}" if e else "unknown"


def cold_lines(c):
    samples, n, iv = c["samples"], c["targets"], c["interval"]
    def up_at(sec):
        return max((u for t, u, _ in samples if t <= sec), default=0)
    marks = [s for s in (2, 5, 10, 20, 30, 60, 120) if s <= samples[-1][0] + 0.5]
    last_t, last_up, _ = samples[-1]
    steps, failures, prev_up, prev_err = [], [], 0, 0
    for t, u, e in samples:
        if u > prev_up:
            steps.append(f"+{u - prev_up} at {t:.0f} s")
        if e > prev_err:
            failures.append(f"{e - prev_err:.0f} at {t:.0f} s")
        prev_up, prev_err = u, e
    done = (f"all {n} up {last_t:.1f} s after the start" if last_up >= n
            else f"**{last_up} of {n} up after {last_t:.0f} s**")
    at = "; up at " + ", ".join(f"{s} s: {up_at(s)}" for s in marks) if marks else ""
    return [f"- {c['name']} ({iv:g} s polls, every target in the config from the start): "
            f"{done}{at}.",
            "  - when the count up rose: " + (", ".join(steps) or "never") + ".",
            "  - failed polls (pglock_poll_errors_total, all targets), by the second they were "
            "seen: " + (", ".join(failures) or "none") + "."]


def report(a):
    recs = []
    for path in a.json:
        with open(path) as f:
            recs.append(json.load(f))
    lines = [a.header, "", "## Figures", ""] + main_table(recs)
    pairs = []
    for big in (r for r in recs if r["targets"] > 1):
        base = next((r for r in recs if r["targets"] == 1 and r["interval"] == big["interval"]),
                    None)
        if base:
            pairs.append((big, base))
    if pairs:
        lines += ["", "## Per target", "",
                  f"({pairs[0][0]['targets']}-target figure − 1-target figure of the same "
                  f"interval) ÷ {pairs[0][0]['targets'] - 1}:", ""]
        lines += per_target_table(pairs)
    if a.cold:
        lines += ["", "## Every target at once", ""]
        for path in a.cold:
            with open(path) as f:
                lines += cold_lines(json.load(f))
    faults = [r for r in recs if "fault" in r]
    if faults:
        lines += ["", "## A dead and a paused target", ""]
        for r in faults:
            lines += fault_lines(r)
    print("\n".join(lines))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    for k in ("url", "name", "out"):
        m.add_argument("--" + k, required=True)
    for k in ("pid", "targets", "scrapes"):
        m.add_argument("--" + k, type=int, required=True)
    for k in ("interval", "window"):
        m.add_argument("--" + k, type=float, required=True)
    for k in ("stop-target", "stop-cmd", "pause-target", "pause-pidfile", "paused-list"):
        m.add_argument("--" + k, default="")
    m.add_argument("--fault-seconds", type=float, default=30)
    m.add_argument("--started", default="all at once")
    m.add_argument("--backend-cmd", default="")
    c = sub.add_parser("cold")
    for k in ("url", "name", "out"):
        c.add_argument("--" + k, required=True)
    for k in ("pid", "targets"):
        c.add_argument("--" + k, type=int, required=True)
    for k in ("interval", "seconds"):
        c.add_argument("--" + k, type=float, required=True)
    r = sub.add_parser("report")
    r.add_argument("--json", nargs="+", required=True)
    r.add_argument("--cold", nargs="*", default=[])
    r.add_argument("--header", required=True)
    a = p.parse_args()
    {"measure": measure, "cold": cold, "report": report}[a.cmd](a)


if __name__ == "__main__":
    main()
