#!/usr/bin/env bash
# make demo: a private cluster, the PostgreSQL manual ingested into tenant pgdocs, a question answered.
set -euo pipefail
cd "$(dirname "$0")/.."
PGCITE=.venv/bin/pgcite
MANUAL=$(ls -d /usr/share/doc/postgresql-doc-*/html | sort -V | head -n1)  # 15 on Debian 12, 17 on 13

echo "== pgcite up"
DSN=$($PGCITE up)
echo "$DSN"
export DATABASE_URL="$DSN"
PSQL="$($(scripts/pg_config.sh) --bindir)/psql"
echo
echo "== status"
$PGCITE status
echo
echo "== an embedding computed inside PostgreSQL"
"$PSQL" "$DSN" -c "SELECT extname, extversion FROM pg_extension ORDER BY 1" \
  -c "SELECT rag.python_info() ->> 'python' AS python, (rag.embed('PostgreSQL')::real[])[1:4] AS first_dims"
echo
echo "== ingest the PostgreSQL manual into tenant pgdocs"
$PGCITE tenant create pgdocs
# embedding threads are a database setting (rag.set_config), never a session's
"$PSQL" "$DSN" -qAt -c "SELECT rag.set_config('torch_threads', '$(nproc)')" >/dev/null
$PGCITE ingest "$MANUAL" --tenant pgdocs --source-url-prefix https://www.postgresql.org/docs/15/
echo
echo "== ask"
$PGCITE ask "How do I prevent transaction ID wraparound failures?" --tenant pgdocs || true
echo
$PGCITE ask "What is the capital of Australia?" --tenant pgdocs || true
echo
echo "The cluster keeps running (pgcite status / pgcite down). Try: $PGCITE ask \"...\" --tenant pgdocs"
