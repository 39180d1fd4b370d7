#!/usr/bin/env bash
# make bench: the benchmarks of docs/BENCHMARKS.md, on the embedded cluster (pgcite up).
# Needs the manual ingested into tenant pgdocs (make demo) for bench_ask.py.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/pgcite up >/dev/null
.venv/bin/python bench/bench_ask.py --tenant pgdocs
.venv/bin/python bench/bench_ingest.py --tenant "bench_$(date +%s)"
