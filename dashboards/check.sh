#!/usr/bin/env bash
# Offline checks of the pglock Grafana dashboards: structure, provisioning files, and every PromQL
# expression through promtool (and a live Prometheus with PGLOCK_PROMETHEUS_URL). The checks are in
# check.py; this is the entry point scripts/test.sh and the README name.
exec python3 "$(dirname -- "${BASH_SOURCE[0]}")/check.py" "$@"
