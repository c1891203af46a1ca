#!/usr/bin/env bash
# Scale benchmark (issue 16): what the number of databases and of targets costs, for two exporter
# binaries side by side in one run against one throwaway PostgreSQL (see tests/bench/README.md).
#
#   1. Idle databases: both exporters watch the server through one target each (poll every 1 s);
#      series and bytes per /metrics scrape with the server's own databases, then with SCALE_DBS
#      more databases that never had a session, then after one short session visited each of
#      them, then with an idle session left open in SCALE_IDLE_SESSIONS of them.
#   2. Many targets: SCALE_TARGETS targets, one per database of the server (the only way the old
#      binary can read lease tables in several databases), for each binary in turn, twice
#      (A B A B): RSS, threads, CPU per poll round, /metrics bytes (plain and gzip when offered) and
#      scrape latency (p50 / p99 of SCALE_SCRAPES sequential scrapes).
#
# Usage: BENCH_OLD_BINARY=/path/to/old/pglock_exporter tests/bench/scale.sh
# Environment: PGLOCK_EXPORTER_BINARY (new binary; default build/pglock_exporter), SCALE_DBS (1000),
# SCALE_IDLE_SESSIONS (100), SCALE_TARGETS (200), SCALE_INTERVAL (poll interval of part 2, 5 s),
# SCALE_SCRAPES (100), SCALE_WINDOW (30 s of CPU measurement), BENCH_OUT (default tests/bench/results/scale-latest.md). Not part of scripts/test.sh.
set -euo pipefail
export LC_ALL=C

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
# shellcheck source=scripts/lib/pg.sh
source "$repo/scripts/lib/pg.sh"

new_bin=${PGLOCK_EXPORTER_BINARY:-$repo/build/pglock_exporter}
old_bin=${BENCH_OLD_BINARY:?set BENCH_OLD_BINARY to the binary to compare with}
dbs=${SCALE_DBS:-1000}
idle_sessions=${SCALE_IDLE_SESSIONS:-100}
targets=${SCALE_TARGETS:-200}
scrapes=${SCALE_SCRAPES:-100}
window=${SCALE_WINDOW:-30}
interval=${SCALE_INTERVAL:-5}
out_md=${BENCH_OUT:-$here/results/scale-latest.md}
for b in "$new_bin" "$old_bin"; do
  [[ -x $b ]] || { echo "scale.sh: $b is not an executable" >&2; exit 2; }
done

tmp=$(mktemp -d)
chmod 755 "$tmp"
mkdir -p "$tmp/logs"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop immediate
  rm -rf "$tmp"
}
trap cleanup EXIT

pg_find_bin
pg_init "$tmp" "$tmp/logs"
pg_start "max_connections = $((targets + idle_sessions + 60))" "shared_buffers = 128MB"
pg_psql -d postgres -c "CREATE ROLE pglock_bench LOGIN; GRANT pg_monitor TO pglock_bench;"

# write_config FILE INTERVAL TIMEOUT DBNAME...: one target per database, named after it.
write_config() {
  local file=$1 interval=$2 timeout=$3
  shift 3
  {
    printf '[poll]\ninterval = "%s"\ntimeout = "%s"\n' "$interval" "$timeout"
    local t
    for t in "$@"; do
      printf '\n[[targets]]\nname = "%s"\ndsn = "host=127.0.0.1 port=%s dbname=%s user=pglock_bench"\n' \
        "$t" "$PG_PORT" "$t"
    done
  } >"$file"
}

# start_exporter NAME BINARY CONFIG: starts it on a free port; sets port_NAME and pid_NAME.
start_exporter() {
  local name=$1 bin=$2 config=$3 port
  port=$(free_port 127.0.0.1)
  "$bin" --config.file="$config" --web.listen-address="127.0.0.1:$port" --log.level=warn \
    >"$tmp/logs/$name.log" 2>&1 &
  pids+=("$!")
  printf -v "pid_$name" '%s' "$!"
  printf -v "port_$name" '%s' "$port"
  local i
  for i in $(seq 1 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "scale.sh: exporter $name did not answer on port $port" >&2
  cat "$tmp/logs/$name.log" >&2
  exit 1
}
stop_exporter() {
  local pid_var=pid_$1
  kill "${!pid_var}" 2>/dev/null || true
  wait "${!pid_var}" 2>/dev/null || true
}

# Prints "series bytes gzip_bytes" of one scrape (gzip_bytes "-" when the exporter sends no gzip).
scrape_size() {
  python3 - "$1" <<'EOF'
import sys, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/metrics"
body = urllib.request.urlopen(urllib.request.Request(url, headers={"Accept-Encoding": "identity"}),
                              timeout=60).read()
series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
resp = urllib.request.urlopen(urllib.request.Request(url, headers={"Accept-Encoding": "gzip"}),
                              timeout=60)
gz = resp.read()
print(series, len(body), len(gz) if resp.headers.get("Content-Encoding") == "gzip" else "-")
EOF
}

# Prints the families with the most series, "family=count" separated by spaces.
top_families() {
  curl -fsS -H 'Accept-Encoding: identity' "http://127.0.0.1:$1/metrics" |
    awk '!/^#/ && NF { sub(/[{ ].*/, ""); n[$0]++ } END { for (f in n) print n[f], f }' |
    sort -rn | head -n "$2" | awk '{ printf "%s`%s` %s", (NR > 1 ? ", " : ""), $2, $1 }'
}

# Prints "p50_ms p99_ms" of N sequential scrapes (Accept-Encoding as Prometheus sends it).
scrape_latency() {
  python3 - "$1" "$2" <<'EOF'
import sys, time, urllib.request
url, n = f"http://127.0.0.1:{sys.argv[1]}/metrics", int(sys.argv[2])
times = []
for _ in range(n):
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    t0 = time.perf_counter()
    urllib.request.urlopen(req, timeout=60).read()
    times.append((time.perf_counter() - t0) * 1000)
times.sort()
pick = lambda q: times[min(len(times) - 1, int(q * len(times)))]
print(f"{pick(0.5):.1f} {pick(0.99):.1f}")
EOF
}

# Prints "rss_mib threads" of a process.
proc_mem() {
  awk '/^VmRSS:/ {rss = $2} /^Threads:/ {th = $2} END {printf "%.1f %d\n", rss / 1024, th}' \
    "/proc/$1/status"
}
# CPU seconds (user + system) of a process so far.
proc_cpu() {
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}
# Prints "up errors": targets with pglock_up 1, and the sum of pglock_poll_errors_total.
targets_up_errors() {
  curl -fsS -H 'Accept-Encoding: identity' "http://127.0.0.1:$1/metrics" |
    awk '/^pglock_up\{/ && $NF == 1 { up++ } /^pglock_poll_errors_total\{/ { e += $NF }
         END { printf "%d %d\n", up, e }'
}

rows_a=()
measure_sizes() {  # measure_sizes LABEL
  local label=$1 a b
  sleep 4  # a few polls at 1 s
  read -r -a a < <(scrape_size "$port_old")
  read -r -a b < <(scrape_size "$port_new")
  rows_a+=("| $label | ${a[0]} | ${b[0]} | ${a[1]} | ${b[1]} | ${b[2]} |")
  printf '%-60s old %6s series %9s B | new %6s series %9s B (gzip %s B)\n' "$label" \
    "${a[0]}" "${a[1]}" "${b[0]}" "${b[1]}" "${b[2]}"
}

echo "== 1. idle databases (PostgreSQL $PG_VERSION, port $PG_PORT)"
write_config "$tmp/one.toml" 1s 1s postgres
start_exporter old "$old_bin" "$tmp/one.toml"
start_exporter new "$new_bin" "$tmp/one.toml"
measure_sizes "the server's own databases (postgres, template0/1)"
for i in $(seq 1 "$dbs"); do printf 'CREATE DATABASE db%04d;\n' "$i"; done | pg_psql -d postgres
measure_sizes "+ $dbs databases that never had a session"
for i in $(seq 1 "$dbs"); do
  "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U pglock_bench -d "$(printf 'db%04d' "$i")" \
    -c 'SELECT 1' >/dev/null
done
measure_sizes "+ each of them visited by one short session (closed)"
idle_pids=()
for i in $(seq 1 "$idle_sessions"); do
  sleep 3600 | "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U pglock_bench \
    -d "$(printf 'db%04d' "$i")" >/dev/null 2>&1 &
  idle_pids+=("$!")
  pids+=("$!")
done
sleep 2
measure_sizes "+ an idle session open in $idle_sessions of them"
stop_exporter old
stop_exporter new
for p in "${idle_pids[@]}"; do kill "$p" 2>/dev/null || true; done
pkill -f "sleep 3600" 2>/dev/null || true

echo "== 2. $targets targets, one per database, poll every ${interval} s"
names=()
for i in $(seq 1 "$targets"); do names+=("$(printf 'db%04d' "$i")"); done
write_config "$tmp/many.toml" "${interval}s" 3s "${names[@]}"
rows_b=() rows_c=()
for round in 1 2; do
  for which in old new; do
    bin_var=${which}_bin
    start_exporter "$which" "${!bin_var}" "$tmp/many.toml"
    port_var=port_$which pid_var=pid_$which
    sleep 10  # connections made, polls running
    read -r _ e0 < <(targets_up_errors "${!port_var}")
    c0=$(proc_cpu "${!pid_var}")
    sleep "$window"
    c1=$(proc_cpu "${!pid_var}")
    read -r up e1 < <(targets_up_errors "${!port_var}")
    read -r rss threads < <(proc_mem "${!pid_var}")
    read -r series bytes gz < <(scrape_size "${!port_var}")
    read -r p50 p99 < <(scrape_latency "${!port_var}" "$scrapes")
    rows_c+=("| $which (run $round) | $(top_families "${!port_var}" 6) |")
    cpu_round=$(awk -v a="$c0" -v b="$c1" -v w="$window" -v i="$interval" \
      'BEGIN { printf "%.1f", (b - a) * 1000 / (w / i) }')
    cpu_share=$(awk -v a="$c0" -v b="$c1" -v w="$window" 'BEGIN { printf "%.1f", (b - a) * 100 / w }')
    rows_b+=("| $which (run $round) | $rss | $threads | $up | $((e1 - e0)) | $cpu_round | $cpu_share | $series | $bytes | $gz | $p50 | $p99 |")
    printf '%s run %s: RSS %s MiB, %s threads, %s targets up, %s poll errors, CPU %s ms/round (%s%% of a core), %s series, %s B (gzip %s), scrape p50 %s ms p99 %s ms\n' \
      "$which" "$round" "$rss" "$threads" "$up" "$((e1 - e0))" "$cpu_round" "$cpu_share" "$series" \
      "$bytes" "$gz" "$p50" "$p99"
    stop_exporter "$which"
  done
done

{
  echo "# Scale benchmark ($(date -u +%F), PostgreSQL $PG_VERSION, $(nproc) cores)"
  echo
  echo "old: \`$old_bin\`; new: \`$new_bin\` (revision $(git -C "$repo" rev-parse --short HEAD))."
  echo "Both measured in the same run against the same server. Part 1 polls every 1 s; part 2 every"
  echo "${interval} s with a 3 s deadline. CPU per round: user + system CPU of the exporter over the"
  echo "${window} s window divided by the rounds in it (one per interval); targets up and poll errors"
  echo "tell whether every target kept its interval."
  echo
  echo "## 1. Idle databases, one target"
  echo
  echo "| server | series old | series new | bytes old | bytes new | gzip new |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows_a[@]}"
  echo
  echo "## 2. $targets targets, one per database, poll every ${interval} s (each binary alone, A B A B)"
  echo
  echo "| binary | RSS MiB | threads | targets up | poll errors in window | CPU ms per round | CPU % of a core | series | bytes | gzip bytes | scrape p50 ms | scrape p99 ms |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows_b[@]}"
  echo
  echo "Families with the most series in that scrape:"
  echo
  echo "| binary | series per family |"
  echo "|---|---|"
  printf '%s\n' "${rows_c[@]}"
} >"$out_md"
echo "written: $out_md"
