#!/usr/bin/env bash
# Writes a copy of a Prometheus rules file whose links to the exporter (the runbook_url and
# locks_url annotations, and the locks page a description sends to when the exporter has no
# verdict to print) start with another base than the scraped address (http://{{ $labels.instance }}),
# for when people cannot open the address Prometheus scrapes (a private network, a proxy in front
# of the exporters).
#
# Usage: rebase_urls.sh RULES_FILE OUTPUT_FILE BASE
#   BASE replaces "http://{{ $labels.instance }}" and may itself use the alert's labels, e.g.
#     'https://pglock.example.com/{{ $labels.instance }}'     a reverse proxy by instance
#     'https://{{ $labels.instance }}'                         the exporters serve TLS
# The output is checked with `promtool check rules` when promtool is on PATH.
set -euo pipefail

[[ $# -eq 3 ]] || { echo "usage: ${0##*/} RULES_FILE OUTPUT_FILE BASE" >&2; exit 2; }
in=$1 out=$2 base=$3
[[ -r $in ]] || { echo "${0##*/}: cannot read rules file: $in" >&2; exit 2; }
[[ $base != *'|'* && $base != *'&'* && $base != *'\'* ]] ||
  { echo "${0##*/}: BASE must not contain |, & or \\" >&2; exit 2; }
base=${base%/}

tmp=$(mktemp "$(dirname -- "$out")/.rebase_urls.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
sed -E -e 's|^([[:space:]]*(runbook_url\|locks_url): ")http://\{\{ \$labels\.instance \}\}/|\1'"$base"'/|' \
  -e 's|http://\{\{ \$labels\.instance \}\}/locks\?target=|'"$base"'/locks?target=|g' "$in" >"$tmp"
if command -v promtool >/dev/null 2>&1; then promtool check rules "$tmp" >/dev/null; fi
mv -- "$tmp" "$out"
trap - EXIT
