#!/usr/bin/env python3
"""Renders the raw samples of tests/bench/run.sh (SECTION POINT METRIC VALUE, tab-separated) as the
markdown tables of tests/bench/results/latest.md, with each goal of the benchmark checked."""

import argparse
import collections
import math


def stats(values):
    """median, p95 (nearest rank), min, max of a list of floats."""
    v = sorted(values)
    n = len(v)
    if n == 0:
        return None
    med = v[(n - 1) // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    p95 = v[min(n - 1, max(0, math.ceil(0.95 * n) - 1))]
    return {"med": med, "p95": p95, "min": v[0], "max": v[-1], "n": n}


def fmt(x, digits=None):
    if x is None:
        return "–"
    if digits is None:
        digits = 2 if abs(x) < 10 else 1 if abs(x) < 100 else 0
    return f"{x:,.{digits}f}"


def med_p95(s):
    return "–" if s is None else f"{fmt(s['med'])} ({fmt(s['p95'])})"


def ratio(a, b, digits=2):
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.{digits}f}×"


def main():
    ap = argparse.ArgumentParser()
    for opt in ("raw", "out", "date", "nproc", "cpu", "mem", "pg-version", "exporter-version",
                "pge-version", "quick", "work-point", "pgbench", "toggle", "wrk-secs", "polls", "cpu-window",
                "leases"):
        ap.add_argument("--" + opt, required=True)
    a = ap.parse_args()

    samples = collections.defaultdict(list)  # (section, point, metric) -> [float]
    points = []
    with open(a.raw) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                continue
            section, point, metric, value = parts
            if point not in points:
                points.append(point)
            try:
                samples[(section, point, metric)].append(float(value))
            except ValueError:
                pass

    def S(section, point, metric):
        return stats(samples.get((section, point, metric), []))

    def one(section, point, metric):
        s = S(section, point, metric)
        return None if s is None else s["med"]

    out = []
    w = out.append
    w("# pglock_exporter benchmark: latest run")
    w("")
    if a.quick == "1":
        w("**BENCH_QUICK=1 smoke run: small scale points and short durations, not for quoting.**")
        w("")
    w(f"- date: {a.date}")
    w(f"- machine: {a.nproc} CPUs ({a.cpu}), {a.mem} RAM; shared and noisy; PostgreSQL, pgbench, "
      "the exporters and the load generators all run on these cores")
    w(f"- PostgreSQL: {a.pg_version}")
    w("  (max_connections 300, max_locks_per_transaction 1024, fsync off, shared_buffers 128MB)")
    w(f"- pglock_exporter: {a.exporter_version} (Release build); poll interval 1 s, top_n 20, "
      f"{a.leases}-row lease table configured; tiered = inventory_interval 60s")
    w(f"- peer: {a.pge_version}, default collectors")
    w(f"- poll figures: {a.polls} consecutive polls per mode and point; CPU over a {a.cpu_window} s "
      "window without scrapes")
    w("- figures are median (p95) unless said otherwise; ratios are between figures of this run")
    w("")

    # --- poll cost ---------------------------------------------------------------------------------
    w("## Poll cost (wall time, ms)")
    w("")
    w("floor = `pg_locks JOIN pg_stat_activity` (advisory rows, identity columns) read by psql over the "
      "exporter's kind of connection (TCP, same role), before and after the exporter runs; "
      "postgres_exporter = one `/metrics` scrape (curl, sequential).")
    w("")
    w("| point | advisory locks held | waiters | sessions | floor | inventory poll | inventory ÷ floor | tiered poll "
      "| tiered ÷ floor | postgres_exporter scrape | inventory ÷ postgres_exporter |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in points:
        if S("meta", p, "held") is None:
            continue
        fl, fu, ti, pg = (S("floor", p, "ms"), S("poll_full", p, "ms"), S("poll_tiered", p, "ms"),
                          S("pge", p, "ms"))
        g = lambda s: None if s is None else s["med"]
        w(f"| {p} | {fmt(one('meta', p, 'held'), 0)} | {fmt(one('meta', p, 'waiters'), 0)} "
          f"| {fmt(one('meta', p, 'sessions'), 0)} | {med_p95(fl)} | {med_p95(fu)} | {ratio(g(fu), g(fl))} "
          f"| {med_p95(ti)} | {ratio(g(ti), g(fl))} | {med_p95(pg)} | {ratio(g(fu), g(pg))} |")
    w("")

    # --- CPU and memory ----------------------------------------------------------------------------
    w("## CPU per poll, memory, output size")
    w("")
    w("CPU = user+system time (all threads) over the window ÷ polls in it; server = the exporter's "
      "PostgreSQL backend. postgres_exporter: per scrape, its process and its backends.")
    w("")
    w("| point | exporter CPU/poll inventory | tiered | server CPU/poll inventory | tiered | postgres_exporter CPU/scrape "
      "(process + server) | RSS inventory | RSS tiered | postgres_exporter RSS | /metrics bytes (lease series) "
      "| gzip bytes | postgres_exporter /metrics bytes |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in points:
        if S("meta", p, "held") is None:
            continue
        mb = lambda kb: None if kb is None else kb / 1024
        w(f"| {p} | {fmt(one('poll_full', p, 'cpu_ms'))} ms | {fmt(one('poll_tiered', p, 'cpu_ms'))} ms "
          f"| {fmt(one('poll_full', p, 'backend_cpu_ms'))} ms | {fmt(one('poll_tiered', p, 'backend_cpu_ms'))} ms "
          f"| {fmt(one('pge', p, 'cpu_ms'))} + {fmt(one('pge', p, 'backend_cpu_ms'))} ms "
          f"| {fmt(mb(one('poll_full', p, 'rss_kb')), 1)} MB | {fmt(mb(one('poll_tiered', p, 'rss_kb')), 1)} MB "
          f"| {fmt(mb(one('pge', p, 'rss_kb')), 1)} MB "
          f"| {fmt(one('poll_full', p, 'metrics_bytes'), 0)} ({fmt(one('poll_full', p, 'lease_series'), 0)} series "
          f"of {fmt(one('poll_full', p, 'metrics_series'), 0)}) | {fmt(one('poll_full', p, 'metrics_gzip_bytes'), 0)} "
          f"| {fmt(one('pge', p, 'metrics_bytes'), 0)} |")
    w("")
    w("What the polls saw (last scrape of each mode): waiters / idle-in-transaction lock holders / held locks")
    w("")
    w("| point | full | tiered |")
    w("|---|---|---|")
    for p in points:
        if S("meta", p, "held") is None:
            continue
        cell = lambda m: " / ".join(fmt(one(m, p, k), 0) for k in ("seen_waiters", "seen_iit_holders", "seen_held"))
        w(f"| {p} | {cell('poll_full')} | {cell('poll_tiered')} |")
    w("")

    # --- per-query --------------------------------------------------------------------------------
    w("## Cost of each exporter query on its own (psql \\timing, ms, median (p95))")
    w("")
    queries = ["settings", "server_info", "activity", "setting_overrides", "database_stats", "advisory_locks",
               "advisory_waiters", "lease_table"]
    w("| query | " + " | ".join(p for p in points if S("meta", p, "held")) + " |")
    w("|---|" + "---:|" * len([p for p in points if S("meta", p, "held")]))
    for q in queries:
        label = "advisory_locks.sql, tiered form" if q == "advisory_waiters" else f"{q}.sql"
        # Runs before queries/server.sql became server_info.sql recorded it as "server".
        cost = lambda p: S("query", p, q) or (S("query", p, "server") if q == "server_info" else None)
        w(f"| {label} | " + " | ".join(med_p95(cost(p)) for p in points if S("meta", p, "held")) + " |")
    w("")
    w("An inventory poll runs all but the tiered form of advisory_locks.sql in one round trip; a tiered poll "
      "between inventories runs the tiered form instead, which reads pg_locks only when a backend waits "
      "on a lock.")
    w("")

    # --- workload -------------------------------------------------------------------------------
    wp = a.work_point
    configs = ["none", "ours_1s", "ours_100ms", "ours_100ms_tiered", "pge_1s", "pge_100ms"]
    labels = {
        "none": "no exporter",
        "ours_1s": "pglock_exporter, poll 1 s (full)",
        "ours_100ms": "pglock_exporter, poll 100 ms (full)",
        "ours_100ms_tiered": "pglock_exporter, poll 100 ms (tiered, inventory 60 s)",
        "pge_1s": "postgres_exporter, scraped every 1 s",
        "pge_100ms": "postgres_exporter, scraped every 100 ms",
        "control_1s": "control: psql running `SELECT 1` every 1 s",
        "floor_1s": "floor: psql running the floor query every 1 s",
    }
    base = samples.get(("workload", wp, "none"), [])
    tps = {}
    if base:
        w(f"## Workload impact at point {wp} (pgbench, `pg_advisory_xact_lock(random 1..100000)`, {a.pgbench})")
        w("")
        w("Rounds interleave the configurations (order rotated each round). Ratio = median TPS ÷ median "
          "TPS with no exporter; per-round ratios are against the no-exporter run of the same round.")
        w("")
        w("| configuration | TPS median | TPS min–max | ratio to none | per-round ratios | scrapes / poll errors |")
        w("|---|---:|---:|---:|---|---:|")
        for c in configs:
            v = samples.get(("workload", wp, c), [])
            if not v:
                continue
            s = stats(v)
            tps[c] = s["med"]
            per_round = ", ".join(f"{x / b:.3f}" for x, b in zip(v, base))
            scr = samples.get(("workload_scrapes", wp, c))
            under = S("pge_under_load", wp, c)
            scr_txt = "–" if not scr else f"{fmt(stats(scr)['med'], 0)} scrapes / run (scrape {fmt(under['med']) if under else '–'} ms)"
            perr = samples.get(("workload_poll_errors", wp, c))
            if perr:
                scr_txt = f"{fmt(sum(perr), 0)} poll errors in {len(perr)} runs"
            w(f"| {labels[c]} | {fmt(s['med'], 0)} | {fmt(s['min'], 0)}–{fmt(s['max'], 0)} "
              f"| {ratio(s['med'], stats(base)['med'], 3)} | {per_round} | {scr_txt} |")
        bs = stats(base)
        w("")
        w(f"Noise of the no-exporter runs: (max − min) ÷ median = {100 * (bs['max'] - bs['min']) / bs['med']:.1f}% "
          f"over {bs['n']} runs.")
        w("")

    # Paired on/off windows (toggle_run in run.sh).
    windows = collections.defaultdict(dict)  # config -> {window: (state, tps)}
    for (section, point, metric), vals in samples.items():
        if section != "toggle" or point != wp:
            continue
        config, win, state = metric.split(":")
        windows[config][int(win)] = (state, vals[0])
    toggle = {}
    if windows:
        w(f"### Paired on/off ({a.toggle})")
        w("")
        w("The exporter (or the scrape loop) is stopped and resumed (SIGSTOP/SIGCONT) every few seconds "
          "during one pgbench run; each \"on\" window's mean TPS is divided by the mean of the \"off\" "
          "windows just before and after it (first second of each window left out). This cancels most of "
          "the background drift that separates whole runs.")
        w("")
        w("| configuration | TPS off (median window) | TPS on (median window) | on ÷ off, median of pairs | pairs min–max | pairs |")
        w("|---|---:|---:|---:|---|---:|")
        for c in ["control_1s", "floor_1s"] + configs[1:]:
            ws = windows.get(c)
            if not ws:
                continue
            pairs = []
            for i, (state, v) in sorted(ws.items()):
                if state != "on":
                    continue
                nb = [ws[j][1] for j in (i - 1, i + 1) if j in ws and ws[j][0] == "off"]
                if nb:
                    pairs.append(v / (sum(nb) / len(nb)))
            off = stats([v for st, v in ws.values() if st == "off"])
            on = stats([v for st, v in ws.values() if st == "on"])
            ps = stats(pairs)
            if ps is None:
                continue
            toggle[c] = ps
            w(f"| {labels[c]} | {fmt(off['med'], 0)} | {fmt(on['med'], 0)} | {ps['med']:.3f}× "
              f"| {ps['min']:.3f}–{ps['max']:.3f} | {ps['n']} |")
        w("")

    # CPU cost of monitoring per second, from the per-poll / per-scrape CPU figures.
    cpu_rows = []
    for p in points:
        if one("poll_full", p, "cpu_ms") is None or (p != wp and one("meta", p, "held") != max(
                (one("meta", q, "held") or 0) for q in points)):
            continue
        for label, ex, be, per_s in (
                ("pglock_exporter, full poll every 1 s", one("poll_full", p, "cpu_ms"), one("poll_full", p, "backend_cpu_ms"), 1),
                ("pglock_exporter, tiered poll every 1 s", one("poll_tiered", p, "cpu_ms"), one("poll_tiered", p, "backend_cpu_ms"), 1),
                ("postgres_exporter, scraped every 1 s", one("pge", p, "cpu_ms"), one("pge", p, "backend_cpu_ms"), 1)):
            if ex is None or be is None:
                continue
            cpu_rows.append((p, label, ex * per_s, be * per_s))
    if cpu_rows:
        w(f"### CPU taken from the machine ({a.nproc} CPUs), one poll or scrape per second")
        w("")
        w("From the CPU-per-poll figures above (tiered: the cheap polls; add one full poll per minute). "
          "The exporter process may run elsewhere; its PostgreSQL backend always runs on the database server.")
        w("")
        w("| point | what | exporter process | its PostgreSQL backend | share of the machine |")
        w("|---|---|---:|---:|---:|")
        for p, label, ex, be in cpu_rows:
            w(f"| {p} | {label} | {fmt(ex)} ms/s | {fmt(be)} ms/s | {100 * (ex + be) / (1000 * int(a.nproc)):.1f}% "
              f"(server side {100 * be / (1000 * int(a.nproc)):.1f}%) |")
        w("")

    # --- scrape path -----------------------------------------------------------------------------
    if S("wrk", wp, "identity_p99_ms"):
        w(f"## Scrape path at point {wp} (wrk -t2 -c50 -d{a.wrk_secs}s against /metrics, polling every 1 s)")
        w("")
        w("The exporter serves with keep-alive off (`enable_keep_alive no`), so every request is a new "
          "connection and wrk counts each server-side close as a socket read error; those are not failures.")
        w("")
        for variant, what in (("leases", f"{a.leases}-row lease table"), ("noleases", "no lease table")):
            rss = one("wrk", wp, variant + "_rss_kb")
            if rss:
                w(f"Exporter RSS after the wrk runs ({what}): {rss / 1024:.1f} MB.")
        w("")
        w("| config | Accept-Encoding | /metrics bytes | p50 | p90 | p99 | requests/s | non-2xx | socket errors |")
        w("|---|---|---:|---:|---:|---:|---:|---:|---|")
        for enc in ("identity", "gzip", "identity-noleases"):
            if one("wrk", wp, enc + "_p99_ms") is None:
                continue
            errs = [l for l in open(a.raw) if f"\t{enc}_socket_errors\t" in l]
            cfg = "no lease table" if enc.endswith("noleases") else f"{a.leases}-row lease table"
            size = one("wrk", wp, "noleases_bytes" if enc.endswith("noleases") else "leases_bytes")
            w(f"| {cfg} | {enc.split('-')[0]} | {fmt(size, 0)} | {fmt(one('wrk', wp, enc + '_p50_ms'))} ms | {fmt(one('wrk', wp, enc + '_p90_ms'))} ms "
              f"| {fmt(one('wrk', wp, enc + '_p99_ms'))} ms | {fmt(one('wrk', wp, enc + '_rps'), 0)} "
              f"| {fmt(one('wrk', wp, enc + '_non2xx'), 0) if one('wrk', wp, enc + '_non2xx') is not None else 0} "
              f"| {errs[0].rstrip().split(chr(9))[3] if errs else 'none'} |")
        w("")

    # --- goals -----------------------------------------------------------------------------------
    w("## Goals of the benchmark")
    w("")
    w("| goal | measured | met |")
    w("|---|---|---|")
    yes = lambda ok: "met" if ok else "**not met**"
    fl, fu, pg = one("floor", wp, "ms"), one("poll_full", wp, "ms"), one("pge", wp, "ms")
    if fl and fu:
        w(f"| full poll ≤ 1.2× floor at {wp} | {fmt(fu)} ms vs {fmt(fl)} ms = {fu / fl:.2f}× | {yes(fu <= 1.2 * fl)} |")
    if fu and pg:
        w(f"| full poll below postgres_exporter's scrape at {wp} | {fmt(fu)} ms vs {fmt(pg)} ms = {fu / pg:.2f}× "
          f"| {yes(fu < pg)} |")
    max_held = max((one("meta", p, "held") or 0) for p in points)
    for p in points:
        if one("meta", p, "held") != max_held or one("poll_tiered", p, "ms") is None:
            continue
        t = S("poll_tiered", p, "ms")
        seen = (one("poll_tiered", p, "seen_waiters") == one("meta", p, "waiters")
                and (one("poll_tiered", p, "seen_iit_holders") or 0) > 0)
        w(f"| tiered poll sees waits and idle holders, costs milliseconds (< 10 ms) at {p} "
          f"| {fmt(t['med'])} ms (p95 {fmt(t['p95'])}); saw {fmt(one('poll_tiered', p, 'seen_waiters'), 0)} waiters, "
          f"{fmt(one('poll_tiered', p, 'seen_iit_holders'), 0)} idle holders | {yes(t['med'] < 10 and seen)} |")
    if "ours_1s" in toggle:
        t = toggle["ours_1s"]
        extra = ""
        for c, what in (("control_1s", "control"), ("floor_1s", "floor query alone")):
            if c in toggle:
                extra += f"; {what} {toggle[c]['med']:.3f}× ({toggle[c]['min']:.3f}–{toggle[c]['max']:.3f})"
        verdict = yes(t["med"] >= 0.99)
        ctl = toggle.get("control_1s")
        if ctl is not None and abs(ctl["med"] - 1) > 0.01:
            # The control should read 1.000: how far it is off is what this run can resolve.
            res = abs(ctl["med"] - 1)
            if t["med"] >= 1 - res:
                verdict = (f"no loss visible, but not resolved to 1%: the control is off by {100 * res:.1f}%")
            else:
                verdict = f"**not met** (beyond the control's {100 * res:.1f}%)"
        w(f"| TPS with a 1 s poll within 1% of none (paired on/off) | {t['med']:.3f}× (pairs {t['min']:.3f}–{t['max']:.3f})"
          f"{extra} | {verdict} |")
    if "ours_100ms" in toggle and "pge_100ms" in toggle:
        o, g = toggle["ours_100ms"], toggle["pge_100ms"]
        w(f"| TPS at 100 ms better than postgres_exporter (paired on/off) | ours {o['med']:.3f}× vs "
          f"postgres_exporter {g['med']:.3f}× of off | {yes(o['med'] > g['med'])} |")
    if "none" in tps and "ours_1s" in tps:
        bs = stats(base)
        noise = (bs["max"] - bs["min"]) / bs["med"]
        r = tps["ours_1s"] / tps["none"]
        verdict = yes(r >= 0.99)
        if noise > 0.01:
            verdict = f"inconclusive: the no-exporter runs spread {100 * noise:.1f}%, more than the 1% to resolve"
        w(f"| TPS with a 1 s poll within noise of none (< 1%) | {r:.3f}× (no-exporter spread {100 * noise:.1f}%) "
          f"| {verdict} |")
    if "ours_100ms" in tps and "pge_100ms" in tps:
        bs = stats(base)
        noise = (bs["max"] - bs["min"]) / bs["med"]
        r = tps["ours_100ms"] / tps["pge_100ms"]
        verdict = yes(r > 1)
        if abs(r - 1) < noise:
            verdict = f"inconclusive: {100 * abs(r - 1):.1f}% apart, within the {100 * noise:.1f}% spread of the no-exporter runs"
        w(f"| TPS at 100 ms better than postgres_exporter | ours {fmt(tps['ours_100ms'], 0)} vs "
          f"{fmt(tps['pge_100ms'], 0)} ({r:.3f}×) | {verdict} |")
    for enc in ("identity", "gzip", "identity-noleases"):
        p99 = one("wrk", wp, enc + "_p99_ms")
        if p99 is not None:
            what = enc.replace("-noleases", ", no lease table") if "noleases" in enc else f"{enc}, {a.leases} leases"
            w(f"| /metrics p99 < 5 ms at 50 clients ({what}) | {fmt(p99)} ms | {yes(p99 < 5)} |")
    rss = one("poll_full", wp, "rss_kb")
    if rss:
        w(f"| RSS < 30 MB at {wp} (after the poll measurement, one scrape at a time) | {rss / 1024:.1f} MB "
          f"| {yes(rss / 1024 < 30)} |")
    for variant, what in (("leases", f"{a.leases} leases"), ("noleases", "no lease table")):
        rss = one("wrk", wp, variant + "_rss_kb")
        if rss:
            w(f"| RSS < 30 MB at {wp} (after wrk, {what}) | {rss / 1024:.1f} MB | {yes(rss / 1024 < 30)} |")
    sizes = [(p, one("poll_full", p, "metrics_bytes")) for p in points if one("poll_full", p, "metrics_bytes")]
    if len(sizes) > 1:
        lo, hi = min(s for _, s in sizes), max(s for _, s in sizes)
        held = [one("meta", p, "held") for p, _ in sizes]
        lease = one("poll_full", wp, "lease_series")
        series = one("poll_full", wp, "metrics_series")
        note = "" if not lease else (f"; {fmt(lease, 0)} of its {fmt(series, 0)} series are per-lease series, "
                                     f"bounded by max_leases ({a.leases} rows), not by top_n")
        w(f"| /metrics size bounded by top_n, not by locks | {fmt(lo, 0)}–{fmt(hi, 0)} bytes "
          f"({hi / lo:.2f}×) while held locks went {fmt(min(held), 0)}→{fmt(max(held), 0)}{note} | {yes(hi / lo <= 1.1)} |")
    w("")

    text = "\n".join(out) + "\n"
    with open(a.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
