#!/usr/bin/env bash
# Prints the pg_config of the newest installed PostgreSQL major that has pgvector >= 0.8,
# else the newest installed major (setup builds pgvector for it). PG_CONFIG in the environment wins.
set -eu
if [ -n "${PG_CONFIG:-}" ]; then echo "$PG_CONFIG"; exit 0; fi
best=""; newest=""
for pc in $(ls -d /usr/lib/postgresql/*/bin/pg_config 2>/dev/null | sort -V); do
  newest="$pc"
  ctl="$("$pc" --sharedir)/extension/vector.control"
  if [ -f "$ctl" ]; then
    v=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$ctl")
    if [ "$(printf '%s\n0.8.0\n' "$v" | sort -V | head -n1)" = "0.8.0" ]; then best="$pc"; fi
  fi
done
if [ -n "$best" ]; then echo "$best"; elif [ -n "$newest" ]; then echo "$newest"; else echo pg_config; fi
