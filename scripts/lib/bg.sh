# shellcheck shell=bash disable=SC2034  # bg_* and last_bg are for the caller
# Background processes of the shell tests and benchmarks (tests/e2e/alerts_live.sh,
# tests/bench/run.sh): each is started with setsid, so its pid is its process group and stopping
# it stops its children too (psql clients are pipelines: a feeder and psql).
#
#   start_bg NAME LOGFILE COMMAND...   starts COMMAND with its output appended to LOGFILE; its pid
#                                      goes to bg_pids and last_bg, its name to bg_name[pid]
#   stop_pid PID                       TERM to the group, up to 5 s, then KILL; forgets it
#   stop_named NAME                    stop_pid for every process started as NAME

declare -a bg_pids=()
declare -A bg_name=()
last_bg=

start_bg() {
  local name=$1 log=$2
  shift 2
  setsid "$@" >>"$log" 2>&1 </dev/null &
  bg_pids+=("$!")
  bg_name[$!]=$name
  last_bg=$!
}

stop_pid() {
  local pid=$1 i
  [[ -n ${bg_name[$pid]:-} ]] || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "bg_name[$pid]"
}

stop_named() {
  local pid
  for pid in "${bg_pids[@]}"; do
    if [[ ${bg_name[$pid]:-} == "$1" ]]; then stop_pid "$pid"; fi
  done
}
