"""Are two versions of rag.ask the same function on the dev set? Row by row, audit rows included.

    DATABASE_URL='host=... port=... user=postgres dbname=pgcite_quotes' .venv/bin/python bench/ask_same.py \\
        OLD_DIR [NEW_DIR] [--reader h10b_reader] [--tenant pgdocs] [--qemb [--embed-dsn DSN]] [--offtopic 361]

OLD_DIR and NEW_DIR (default: this checkout's sql/core) hold sql/core/*.sql files (e.g. another commit's: `git
archive COMMIT sql/core | tar -x -C /tmp/x`). For each version in turn: its files run over the database (a
superuser's connection; in file order, as an install or upgrade runs them, 090-grants included), then every
question of eval/pgdocs-dev.jsonl and the first --offtopic of eval/offtopic.jsonl is asked as the reader
(rag.ask, k 5; with --qemb the question's embedding passed, computed first by rag.embed on --embed-dsn: the
core path), and its audit row read back. Compared per question: every column rag.ask returns but ask_id
(status, answer, reason, citations with their quote offsets, evidence), and every column of the audit row but
those that differ between two asks by construction (ask_id, asked_at, timings, and the hashes and seq that
cover them). After each version: rag.verify_log as the reader must be ok with nothing unsealed. The database
keeps NEW_DIR's version at the end. Exit status 1 if anything differs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
# columns of rag.ask_log that differ between two asks of one question whatever the code
VOLATILE_LOG = ("ask_id", "asked_at", "timings", "seq", "prev_hash", "row_hash", "entry_hash")


def load_sql(conn: psycopg.Connection, sql_dir: Path) -> None:
    """Runs every *.sql file of sql_dir in name order, in one transaction."""
    with conn.transaction():
        for f in sorted(sql_dir.glob("*.sql")):
            conn.execute(f.read_text())


def questions(offtopic: int) -> list[str]:
    out = []
    for file, limit in (("pgdocs-dev.jsonl", None), ("offtopic.jsonl", offtopic)):
        rows = [json.loads(x) for x in (ROOT / "eval" / file).read_text().splitlines() if x.strip()]
        out += [r["question"] for r in rows][:limit]
    return out


def run(owner, reader, tenant: str, qs: list[str], qembs: dict) -> tuple[list, dict]:
    """Each question asked once: (the row rag.ask returned less ask_id, its audit row less VOLATILE_LOG)."""
    rows = []
    for q in qs:
        r = reader.execute(
            "SELECT ask_id, status, answer, reason, citations::text, evidence::text "
            "FROM rag.ask(%s, %s, 5, %s::vector)",
            (q, tenant, qembs.get(q)),
        ).fetchone()
        log = owner.execute(
            "SELECT (to_jsonb(l) - %s::text[])::text FROM rag.ask_log AS l WHERE l.ask_id = %s",
            (list(VOLATILE_LOG), r[0]),
        ).fetchone()[0]
        rows.append((r[1:], log))
    check = reader.execute(
        "SELECT ok, checked, problem, unsealed FROM rag.verify_log(%s)", (tenant,)
    ).fetchone()
    return rows, {"ok": check[0], "checked": check[1], "problem": check[2], "unsealed": check[3]}


def first_difference(a, b) -> str:
    names = ("status", "answer", "reason", "citations", "evidence")
    for name, x, y in zip(names, a[0], b[0], strict=True):
        if x != y:
            return f"ask.{name}: {str(x)[:120]!r} != {str(y)[:120]!r}"
    ja, jb = json.loads(a[1]), json.loads(b[1])
    for k in sorted(set(ja) | set(jb)):
        if ja.get(k) != jb.get(k):
            return f"log.{k}: {str(ja.get(k))[:120]!r} != {str(jb.get(k))[:120]!r}"
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new", nargs="?", default=str(ROOT / "sql/core"))
    ap.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    ap.add_argument("--reader", default="h10b_reader")
    ap.add_argument("--tenant", default="pgdocs")
    ap.add_argument("--qemb", action="store_true", help="pass the question's embedding (the core path)")
    ap.add_argument("--embed-dsn", help="where rag.embed runs for --qemb (default: --dsn)")
    ap.add_argument("--offtopic", type=int, default=361)
    args = ap.parse_args()
    qs = questions(args.offtopic)
    owner = psycopg.connect(args.dsn, autocommit=True)
    qembs: dict[str, str] = {}
    if args.qemb:
        with psycopg.connect(args.embed_dsn or args.dsn, autocommit=True) as e:
            qembs = {q: e.execute("SELECT rag.embed(%s)::text", (q,)).fetchone()[0] for q in qs}
    results = {}
    for label, d in (("old", args.old), ("new", args.new)):
        load_sql(owner, Path(d))
        # a new connection: no plan or function cache of the other version
        with psycopg.connect(
            psycopg.conninfo.make_conninfo(args.dsn, user=args.reader), autocommit=True
        ) as reader:
            results[label] = run(owner, reader, args.tenant, qs, qembs)
        print(f"{label} ({d}): verify_log {results[label][1]}")
    old, new = results["old"][0], results["new"][0]
    differ = [(i, first_difference(a, b)) for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    statuses = {}
    for row, _log in new:
        statuses[row[0]] = statuses.get(row[0], 0) + 1
    print(
        f"{len(qs)} questions ({'embedding passed' if args.qemb else 'embedded in the database'}), "
        f"statuses {statuses}; {len(differ)} differ"
    )
    for i, what in differ[:10]:
        print(f"  #{i} {qs[i][:70]!r}: {what}")
    bad_log = [v for _rows, v in results.values() if not v["ok"] or v["unsealed"]]
    return 1 if differ or bad_log else 0


if __name__ == "__main__":
    sys.exit(main())
