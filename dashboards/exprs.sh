#!/usr/bin/env bash
# Prints every PromQL expression of the pglock dashboards, one per line, variables replaced, for
# /api/v1/query; --raw prints them as stored. The code and its usage are in exprs.py.
exec python3 "$(dirname -- "${BASH_SOURCE[0]}")/exprs.py" "$@"
