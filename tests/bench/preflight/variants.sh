#!/usr/bin/env bash
# Writes the preflight reads (queries/preflight.sql for one request, queries/preflight_tables.sql
# for preflight_tables) with their templates filled for two catalog tables into DIR, as
# poll_floor_bench variants, from the queries themselves: the bench times what the exporter sends.
# Usage: tests/bench/preflight/variants.sh DIR
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:?usage: variants.sh DIR}
mkdir -p "$out"
grep -v '^--' queries/preflight.sql |
  sed -e "s/{schema}/'pg_catalog'/g" -e "s/{name}/'pg_class'/g" -e "s/{role}/'postgres'/g" \
      -e "s/{waitstart}/date_part('epoch', l.waitstart)/g" >"$out/request.sql"
grep -v '^--' queries/preflight_tables.sql |
  sed -e "s/{labels}/ARRAY['pg_catalog.pg_class','pg_catalog.pg_attribute']/g" \
      -e "s/{schemas}/ARRAY['pg_catalog','pg_catalog']/g" \
      -e "s/{names}/ARRAY['pg_class','pg_attribute']/g" >"$out/tables.sql"
