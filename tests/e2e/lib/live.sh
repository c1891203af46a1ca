# shellcheck shell=bash disable=SC2154,SC2034  # here, py, logs in; webhook_url out
# What the live end-to-end tests (tests/e2e/alerts_live.sh, replicas.sh) share: their time stamps and
# failure messages, the webhook receiver and the wait for Prometheus and Alertmanager to be ready.
# Source it after scripts/lib/bg.sh, with E2E_NAME (the prefix of say's lines), here, py and
# logs set.
#
#   since A [B]          seconds from A to B (default: now), one decimal
#   say TEXT...          a line with the seconds since the script began
#   fail WHY [LINE...]   the reason and any lines after it on stderr, then exit 1
#   e2e_start_webhook HOOKS PORT_FILE
#                        starts tests/e2e/webhook.py, appending to HOOKS; sets webhook_url
#   e2e_wait_ready URL PID
#                        waits up to 30 s for URL/-/ready; fails when PID exits meanwhile

t0=$EPOCHREALTIME
since() { awk -v a="$1" -v b="${2:-$EPOCHREALTIME}" 'BEGIN { printf "%.1f", b - a }'; }
say() { printf '[%s %6ss] %s\n' "$E2E_NAME" "$(since "$t0")" "$*"; }
fail() {
  printf '\nFAIL: %s\n' "$1" >&2
  shift
  local line
  for line in "$@"; do printf '%s\n' "$line" >&2; done
  exit 1
}

e2e_start_webhook() {
  local hooks=$1 port_file=$2 pid i
  start_bg webhook "$logs/webhook.log" "$py" "$here/webhook.py" --listen 127.0.0.1:0 \
    --out "$hooks" --port-file "$port_file"
  pid=$last_bg
  for ((i = 0; ; i++)); do
    [[ -s $port_file ]] && curl -fsS "http://127.0.0.1:$(cat "$port_file")/-/ready" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || fail "the webhook receiver exited" "$(tail -n 20 "$logs/webhook.log")"
    ((i < 100)) || fail "the webhook receiver did not start"
    sleep 0.1
  done
  webhook_url=http://127.0.0.1:$(cat "$port_file")/
}

e2e_wait_ready() {
  local url=$1 pid=$2 i
  for ((i = 0; ; i++)); do
    curl -fsS "$url/-/ready" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || fail "the process behind $url exited"
    ((i < 300)) || fail "$url is not ready after 30 s"
    sleep 0.1
  done
}
