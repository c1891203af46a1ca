#!/usr/bin/env bash
# Checks the alerting side of pglock_exporter; exits non-zero on the first failure. Works from any cwd.
#   1. promtool check rules  alerts/pglock.rules.yml       (syntax, templates, lint)
#   2. promtool test rules   alerts/tests/pglock.rules.test.yml
#   3. the alert names are exactly those of expected_alerts below, each has a runbook that its
#      runbook_url points to, a row in the runbook index, and at least one test in which it fires
#   4. the false-page audit: each runbook has a "Does not fire when" section and each alert a row in
#      the runbook README's audit table naming a quiet-case test that exists
#   5. alerts/shorten_for.sh produces a copy that passes promtool and has no `for:` above 2s, but
#      for the alerts it is told to keep
#   6. alerts/rebase_urls.sh moves every runbook_url and locks_url to another base
#   7. alerts/pglock.replicas.rules.yml is what alerts/replicas.py makes of the rules, and its tests
#      pass
set -euo pipefail

alerts_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd -- "$alerts_dir/.."

rules=alerts/pglock.rules.yml
tests=alerts/tests/pglock.rules.test.yml
runbooks=alerts/runbooks
# Links point at the exporter that raised the alert (it serves the runbooks and /locks).
runbook_base='http://{{ $labels.instance }}/runbooks'
locks_url='http://{{ $labels.instance }}/locks?target={{ $labels.target }}'

# The alerts the exporter promises: the contract. Change it on purpose, not to follow the rules
# file. PglockSessionsEndedByTimeout is retired in favour of PglockAdvisoryLockLost (see
# alerts/runbooks/README.md, "Retired alerts").
expected_alerts=(
  PglockTargetDown
  PglockShardTargetsUnpolled
  PglockShardingMismatch
  PglockAdvisoryLockWaitLong
  PglockAdvisoryLockWaitCritical
  PglockIdleInTransactionLockHolder
  PglockLockAboutToBeDropped
  PglockAdvisoryLockLost
  PglockAdvisoryLockTakeover
  PglockLockHoldersExhaustClientPool
  PglockLeaseExpired
  PglockLeaseExpiredTakeover
  PglockLeaseOverlap
  PglockLeaseHeldTooLong
  PglockQueueJobHeldTooLong
  PglockSessionLockThroughTransactionPooler
  PglockPooledLockInherited
  PglockLockWaitLong
  PglockLockWaitCritical
  PglockBlockingRootIdleInTransaction
  PglockLockQueue
  PglockLockTableFilling
  PglockLockTableNearlyFull
  PglockLockManagerContention
  PglockServerLogUnreadable
  PglockLockTimeoutsPersist
)

# Lease alerts whose runbooks and tests wait for the lease hand-over change: they are in the audit
# table as "see lease hand-over change" and have no "Does not fire when" section yet. Empty: every
# alert has both.
audit_pending=()

fail() {
  echo "check.sh: $*" >&2
  exit 1
}

command -v promtool >/dev/null 2>&1 || fail "promtool not found (Debian package: prometheus)"

echo "== promtool check rules $rules"
promtool check rules "$rules"

echo "== promtool test rules $tests"
promtool test rules "$tests"

echo "== alert names, runbooks, tests"
mapfile -t rule_alerts < <(sed -n 's/^[[:space:]]*-[[:space:]]*alert:[[:space:]]*\([A-Za-z0-9_]*\).*/\1/p' "$rules" | sort -u)
mapfile -t want < <(printf '%s\n' "${expected_alerts[@]}" | sort -u)
if [[ "${rule_alerts[*]}" != "${want[*]}" ]]; then
  diff <(printf '%s\n' "${want[@]}") <(printf '%s\n' "${rule_alerts[@]}") >&2 || true
  fail "alert names in $rules differ from expected_alerts in alerts/check.sh (< expected, > rules)"
fi

# Every runbook_url must name the alert it belongs to; every locks_url is the target's /locks.
bad_urls=$(awk -v base="$runbook_base" -v locks="$locks_url" '
  /^[[:space:]]*-[[:space:]]*(alert|record):/ { name = ($2 ~ /alert:/ || $2 == "alert:") ? $3 : "" }
  /runbook_url:|locks_url:/ {
    url = $0
    sub(/^[^:]*:[[:space:]]*/, "", url); gsub(/"/, "", url)
    want = ($1 == "runbook_url:") ? base "/" name : locks
    if (url != want) printf "  line %d: %s (alert %s)\n", NR, url, name
  }
' "$rules")
[[ -z $bad_urls ]] || fail "runbook_url does not match its alert:"$'\n'"$bad_urls"

for a in "${expected_alerts[@]}"; do
  [[ -f $runbooks/$a.md ]] || fail "missing runbook $runbooks/$a.md"
  grep -q "($a.md)" "$runbooks/README.md" || fail "$runbooks/README.md has no entry for $a"
  # A test that expects it to fire: "alertname: X" followed by a non-empty exp_alerts list.
  awk -v a="$a" '
    $0 ~ "alertname: " a "$" { armed = 1; next }
    armed && /exp_alerts:[[:space:]]*$/ { found = 1 }
    armed && /exp_alerts:/ { armed = 0 }
    END { exit !found }
  ' "$tests" || fail "no test in $tests expects $a to fire"
  for field in summary description runbook_url; do
    awk -v a="$a" -v f="$field" '
      /^[[:space:]]*-[[:space:]]*(alert|record):/ { if (in_rule && !seen) bad = 1; in_rule = ($3 == a); seen = 0 }
      in_rule && $1 == f ":" { seen = 1 }
      END { if (in_rule && !seen) bad = 1; exit bad }
    ' "$rules" || fail "a rule of $a has no $field annotation"
  done
done
echo "  ${#expected_alerts[@]} alerts: names match the list, runbooks, index rows and firing tests present"

echo "== false-page audit"
# Test names, as written after "- name:" in the tests file (quotes removed).
mapfile -t test_names < <(sed -n 's/^[[:space:]]*-[[:space:]]*name:[[:space:]]*//p' "$tests" | sed 's/^"\(.*\)"$/\1/')
for a in "${expected_alerts[@]}"; do
  pending=0
  for p in "${audit_pending[@]}"; do [[ $p == "$a" ]] && pending=1; done
  row=$(awk '/^## / { in_audit = ($0 == "## False-page audit") } in_audit' "$runbooks/README.md" |
    grep -F "| [$a]($a.md) |" || true)
  [[ -n $row ]] || fail "$runbooks/README.md: no row for $a"
  quiet=$(awk -F'|' '{ print $(NF - 1) }' <<<"$row" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
  if ((pending)); then
    [[ $quiet == "see lease hand-over change" ]] || fail "audit table: $a should say: see lease hand-over change"
    continue
  fi
  grep -q '^## Does not fire when' "$runbooks/$a.md" || fail "$runbooks/$a.md has no \"## Does not fire when\" section"
  [[ $quiet =~ ^\`(.*)\`$ ]] || fail "audit table: the quiet-case test of $a is not a \`test name\`: $quiet"
  found=0
  for t in "${test_names[@]}"; do [[ $t == "${BASH_REMATCH[1]}" ]] && found=1; done
  ((found)) || fail "audit table: $a names test \"${BASH_REMATCH[1]}\", which is not in $tests"
done
echo "  every alert has a quiet-case test in the audit table and a \"Does not fire when\" section (${#audit_pending[@]} pending: lease hand-over change)"

# Blocking episodes and deadlocks are history for the morning review, not pages: an episode that
# ended by itself needs nobody. Logged lock waits likewise: workers taking turns on a lock make one
# per hand-over, however healthy (alerts/runbooks/README.md, "The server's log").
if grep -nE '^[[:space:]]*expr:.*pglock_(blocking_episode|deadlocks|logged_lock_wait)' "$rules" ||
  grep -nE '^[[:space:]]+pglock_(blocking_episode|deadlocks|logged_lock_wait)' "$rules"; then
  fail "an alert rule uses the blocking episode, deadlock or logged wait counters: they must feed no alert"
fi
echo "  no alert uses the blocking episode, deadlock or logged wait counters"

# One source of advice (docs/blocking-verdicts.md): the verdict's words come from the exporter. An
# alert whose description says what to do about a pid prints the advice label of
# pglock_session_verdict_info (the words /locks prints after "Do:"); without that series it says
# where the verdict is. No description words a verdict of its own: none names pg_terminate_backend(
# or pg_cancel_backend(, none reads the verdict's action or command labels, none chooses a command
# from the blocker's state.
python3 - "$rules" <<'PY' || fail "an alert description words a verdict of its own instead of printing the exporter's advice"
import re, sys
text = open(sys.argv[1]).read()
bad = []
for block in re.split(r"\n\s*- alert: ", text)[1:]:
    name = block.split()[0]
    description = block.split("description:", 1)[-1].split("runbook_url:", 1)[0]
    why = []
    if re.search(r"pg_(terminate|cancel)_backend\(", description):
        why.append("names a command for a pid")
    if re.search(r"\.Labels\.(action|command|then_command|pooler)\b", description):
        why.append("words the verdict's labels itself")
    if re.search(r"\$labels\.(blocker|root)_state\s*\"", description):
        why.append("chooses by the blocker's state")
    if ".Labels.advice" in description and "advice!=" not in description:
        why.append("prints advice from a series that may lack it")
    bad += ["  " + name + ": " + w for w in why]
for line in bad:
    print(line, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
echo "  every description that says what to do prints the verdict's advice, or where it is"

echo "== replicas: alerts/pglock.replicas.rules.yml (alerts/replicas.py)"
python3 alerts/replicas.py --check
promtool check rules alerts/pglock.replicas.rules.yml >/dev/null
promtool test rules alerts/tests/pglock.replicas.test.yml
echo "  the replicas' rules are made from the shipped ones, load, and page once per incident in their tests"

echo "== shorten_for.sh"
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
alerts/shorten_for.sh "$rules" "$tmp/short.rules.yml"
long_for=$(grep -nE '^[[:space:]]*(-[[:space:]]+)?for:' "$tmp/short.rules.yml" | grep -vE "for:[[:space:]]*[\"']?(0s|1s|2s|[0-9]+ms)[\"']?[[:space:]]*(#.*)?$" || true)
[[ -z $long_for ]] || fail "shortened rules still have long for: values:"$'\n'"$long_for"
promtool check rules "$tmp/short.rules.yml" >/dev/null
echo "  shortened copy passes promtool check rules"
alerts/shorten_for.sh "$rules" "$tmp/kept.rules.yml" PglockSessionLockThroughTransactionPooler 2>/dev/null
kept=$(diff "$tmp/short.rules.yml" "$tmp/kept.rules.yml" | grep -c '^>' || true)
grep -A3 -- '- alert: PglockSessionLockThroughTransactionPooler$' "$tmp/kept.rules.yml" | grep -q 'for: 1m' &&
  [[ $kept == 1 ]] || fail "shorten_for.sh KEEP did not keep exactly the named alert's for: (lines changed: $kept)"
echo "  an alert named in KEEP keeps its for:, and only it"

echo "== suggested Alertmanager inhibitions (alerts/runbooks/README.md)"
command -v amtool >/dev/null 2>&1 || fail "amtool not found (Debian package: prometheus-alertmanager)"
{
  printf 'route:\n  receiver: none\nreceivers:\n  - name: none\n'
  sed -n '/^## Alertmanager inhibitions/,/^## /p' alerts/runbooks/README.md |
    sed -n '/^```yaml$/,/^```$/p' | sed '1d;$d'
} >"$tmp/alertmanager.yml"
grep -q '^inhibit_rules:' "$tmp/alertmanager.yml" || fail "no inhibit_rules block in alerts/runbooks/README.md"
amtool check-config "$tmp/alertmanager.yml" >"$tmp/amtool.log" 2>&1 ||
  fail "the suggested inhibit_rules do not load:"$'\n'"$(cat "$tmp/amtool.log")"
inhibit_names=$(grep -oE 'alertname="[A-Za-z0-9]+"' "$tmp/alertmanager.yml" | sed 's/alertname="\(.*\)"/\1/' | sort -u)
for a in $inhibit_names; do
  # A here-string, not a pipe: grep -q stops reading at the first match, and under pipefail the
  # printf it cut off would fail the check now and then.
  grep -qx "$a" <<<"$(printf '%s\n' "${rule_alerts[@]}")" || fail "inhibition names $a, which is not an alert"
done
echo "  amtool check-config passes; $(wc -w <<<"$inhibit_names") alert names, all defined"

echo "== rebase_urls.sh"
base='https://pglock.example.com/{{ $labels.instance }}'
alerts/rebase_urls.sh "$rules" "$tmp/rebased.rules.yml" "$base"
# Every link to the exporter: the runbook_url and locks_url annotations, and the locks page a
# description names when there is no verdict to print.
left=$(grep -cF 'http://{{ $labels.instance }}/' "$tmp/rebased.rules.yml" || true)
moved=$(grep -oF "$base/" "$tmp/rebased.rules.yml" | wc -l)
want=$(grep -oF 'http://{{ $labels.instance }}/' "$rules" | wc -l)
annotations=$(grep -cE '^[[:space:]]*(runbook_url|locks_url):' "$rules")
[[ $left == 0 && $moved == "$want" && $want -gt $annotations ]] ||
  fail "rebase_urls.sh moved $moved of $want links ($left lines left; $annotations url annotations)"
echo "  all $want links ($annotations url annotations, $((want - annotations)) in descriptions) moved to $base"

echo "== all alert checks passed"
