#!/usr/bin/env bash
# Writes a copy of a Prometheus rules file in which every `for:` longer than 2s becomes `for: 2s`.
#
# For live end-to-end tests that scrape and evaluate every second: they cannot wait minutes for an
# alert to leave the pending state. Everything else is copied byte for byte, including range windows
# such as [5m] in expressions (event alerts stay "firing" for that window, which is what the test wants
# to see). Durations use Prometheus syntax (1y 1w 1d 1h 1m 1s 1ms, combined as in 1h30m); quoted values
# and trailing comments are kept.
#
# Usage: shorten_for.sh RULES_FILE OUTPUT_FILE [KEEP]
# KEEP, an extended regular expression matched against whole alert names: those alerts keep their
# `for:` (a live test that checks an alert fires within its real pending time).
# If promtool is on PATH the output is checked with `promtool check rules`.
set -euo pipefail

usage() {
  echo "usage: ${0##*/} RULES_FILE OUTPUT_FILE [KEEP]" >&2
  exit 2
}

[[ $# -eq 2 || $# -eq 3 ]] || usage
in=$1
out=$2
keep=${3:-}
[[ -f $in && -r $in ]] || { echo "${0##*/}: cannot read rules file: $in" >&2; exit 2; }
out_dir=$(dirname -- "$out")
[[ -d $out_dir ]] || { echo "${0##*/}: output directory does not exist: $out_dir" >&2; exit 2; }

# Write next to the output and rename, so a failure never leaves a half-written file behind, and the
# output may be the input itself.
tmp=$(mktemp "$out_dir/.shorten_for.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT

awk -v max_ms=2000 -v short=2s -v keep="$keep" '
  # Milliseconds in a Prometheus duration, or -1 if it is not one.
  function to_ms(d,    total, n, unit) {
    if (d == "") return -1
    total = 0
    while (d != "") {
      if (!match(d, /^[0-9]+/)) return -1
      n = substr(d, 1, RLENGTH) + 0
      d = substr(d, RLENGTH + 1)
      if (substr(d, 1, 2) == "ms") { total += n; d = substr(d, 3); continue }
      unit = substr(d, 1, 1)
      d = substr(d, 2)
      if (unit == "s")      total += n * 1000
      else if (unit == "m") total += n * 60000
      else if (unit == "h") total += n * 3600000
      else if (unit == "d") total += n * 86400000
      else if (unit == "w") total += n * 604800000
      else if (unit == "y") total += n * 31536000000
      else return -1
    }
    return total
  }
  {
    # The alert whose keys follow ("- alert: Name"); a recording rule ends it.
    if (match($0, /^[ \t]*-[ \t]+(alert|record):[ \t]*/)) {
      alert = substr($0, RLENGTH + 1)
      sub(/[ \t]+#.*$/, "", alert)
      if ($0 ~ /record:/) alert = ""
    }
    kept = keep != "" && alert != "" && alert ~ ("^(" keep ")$")
    # A `for:` key, possibly as the first key of a list item ("- for: 5m").
    if (!kept && match($0, /^[ \t]*(-[ \t]+)?for:[ \t]*/)) {
      key = substr($0, 1, RLENGTH)
      value = substr($0, RLENGTH + 1)
      comment = ""
      if (match(value, /[ \t]+#.*$/)) {
        comment = substr(value, RSTART)
        value = substr(value, 1, RSTART - 1)
      }
      sub(/[ \t]+$/, "", value)
      quote = ""
      if (value ~ /^".*"$/ || value ~ /^\047.*\047$/) {
        quote = substr(value, 1, 1)
        value = substr(value, 2, length(value) - 2)
      }
      ms = to_ms(value)
      if (ms < 0) {
        # Not a duration: most likely text in a block scalar that happens to start with "for:".
        printf "shorten_for: line %d left as is (not a duration): %s\n", NR, $0 > "/dev/stderr"
      } else if (ms > max_ms) {
        $0 = key quote short quote comment
        changed++
      }
    }
    print
  }
  END { printf "shorten_for: %d for: value(s) set to %s\n", changed + 0, short > "/dev/stderr" }
' "$in" >"$tmp"

if command -v promtool >/dev/null 2>&1; then
  promtool check rules "$tmp" >/dev/null || {
    echo "${0##*/}: the shortened rules do not pass promtool check rules" >&2
    promtool check rules "$tmp" >&2 || true
    exit 1
  }
fi

chmod --reference="$in" "$tmp" 2>/dev/null || chmod 0644 "$tmp"
mv -f -- "$tmp" "$out"
trap - EXIT
