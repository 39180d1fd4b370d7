"""Spelling correction at scale: rag._correct_question per tenant class, on the questions and their typos.

    BENCH_DB=pgcite_bench_1m .venv/bin/python bench/bench_correct.py LABEL [--out FILE]

On the scale benchmark's database (bench/corpus.py, bench/questions.py), as the superuser: for each question
of pgcite_bench.question and one typo of it (its longest word of 6+ letters with the third letter dropped),
rag._correct_question(tenant, question, rag._params()) twice on one connection; the second pass is timed.
Prints p50 / p95 / max per class (largest, 1 %, tiny; "-typo" for the variants) and, with --out, writes every
corrected question as JSON, so two runs (e.g. another commit's sql/core/040-retrieve.sql loaded in between)
can be compared: `--compare A.json B.json` prints how many corrections differ. With `--reference FILE` (a
file holding another version's `CREATE OR REPLACE FUNCTION rag._correct_question(...)`, e.g. from
`git show main:sql/core/040-retrieve.sql`), that version is created as a pg_temp function and called
alternately with the installed one on every case, so both see the same machine load; prints both and
counts the cases whose corrections differ.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402


def typo(question: str) -> str | None:
    words = [w for w in question.split() if w.isalpha() and len(w) > 5]
    if not words:
        return None
    w = max(words, key=len)
    return question.replace(w, w[:2] + w[3:], 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("label", nargs="?", default="run")
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=2, metavar="JSON")
    ap.add_argument("--reference", help="SQL file with another version of rag._correct_question")
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        print(f"{len(a)} questions, {sum(a[k] != b.get(k) for k in a)} corrections differ")
        return
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    with psycopg.connect(corpus.db_dsn(dbname), autocommit=True) as c:
        qs = c.execute("SELECT class, tenant, question FROM pgcite_bench.question ORDER BY id").fetchall()
        cases = list(qs) + [(cls + "-typo", t, typo(q)) for cls, t, q in qs if typo(q)]
        funcs = {args.label: "rag._correct_question"}
        if args.reference:
            text = Path(args.reference).read_text()
            start = text.index("CREATE OR REPLACE FUNCTION rag._correct_question(")
            end = text.index("$fn$;", text.index("AS $fn$", start) + 7) + len("$fn$;")
            c.execute(
                text[start:end].replace(
                    "FUNCTION rag._correct_question(", "FUNCTION pg_temp.reference_correct("
                )
            )
            funcs["reference"] = "pg_temp.reference_correct"
        got: dict[str, str] = {}
        ms: dict[str, list[float]] = {}
        differ = 0
        for rep in range(2):
            for i, (cls, tenant, q) in enumerate(cases):
                seen = {}
                for label, fn in sorted(funcs.items(), reverse=(i + rep) % 2 == 1):
                    t0 = time.perf_counter()
                    seen[label] = c.execute(f"SELECT {fn}(%s, %s, rag._params())", (tenant, q)).fetchone()[0]
                    if rep:
                        ms.setdefault(f"{label} {cls}", []).append((time.perf_counter() - t0) * 1000)
                got[f"{tenant}|{q}"] = seen[args.label]
                differ += rep and len(set(seen.values())) > 1
        if args.reference:
            print(f"{len(cases)} cases, {differ} corrections differ from the reference")
    for cls, v in sorted(ms.items()):
        v.sort()
        p95 = v[min(len(v) - 1, int(len(v) * 0.95))]
        p50 = statistics.median(v)
        print(f"{cls:<24} n {len(v):3}  p50 {p50:6.2f}  p95 {p95:6.2f}  max {v[-1]:6.2f} ms")
    if args.out:
        Path(args.out).write_text(json.dumps(got, indent=0, sort_keys=True))


if __name__ == "__main__":
    main()
