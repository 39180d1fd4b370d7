"""rag.verify before and after security round 9 (0.8.0), side by side in one run: 0.7.0's body (frozen in
extension/released/pgcite--0.7.0.sql, created as pg_temp.verify_070) and the installed rag.verify, on answers
of 1,000, 4,000 and 16,000 citation markers.

    .venv/bin/python bench/verify_ab.py --dsn 'host=... port=... dbname=... user=postgres' [--repeat 3]

A superuser's connection (pg_temp.verify_070 is created in its session). The database needs pgcite 0.8.0;
the benchmark stores one document in a tenant of its own (verify_ab, created if missing; one chunk of 200
sentences, embeddings supplied: no PL/Python needed). Each answer is "Sentence i [i]." for i = 1..N (every
marker a distinct number), with citations of the first 10 numbers (then: of all N), every other one verifiable
(its quote occurs in the chunk) and the rest not; every marker without a verified citation is removed.
Old and new alternate (old, new, new, old, ...), `--repeat` times each; printed: the
median seconds of each, the ratio old / new, and whether both returned the same answer and citations.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1000, 4000, 16000)


def old_verify_sql() -> str:
    text = (ROOT / "extension/released/pgcite--0.7.0.sql").read_text()
    m = re.search(r"CREATE OR REPLACE FUNCTION rag\.verify\(answer_text text.*?\n\$fn\$;\n", text, re.S)
    assert m, "0.7.0's rag.verify not found"
    return m.group(0).replace("rag.verify(", "pg_temp.verify_070(", 1).replace("verify.", "verify_070.")


def setup(c: psycopg.Connection) -> tuple[int, list[str]]:
    sentences = [f"Sentence number {i} says that fact {i} holds." for i in range(200)]
    if not c.execute("SELECT 1 FROM rag.tenant WHERE tenant = 'verify_ab'").fetchone():
        c.execute("SELECT rag.create_tenant('verify_ab')")
    item = {"content": " ".join(sentences), "embedding": [0.05] * 383 + [0.9], "title": "verify_ab"}
    c.execute("SELECT * FROM rag.store_document('verify_ab', 'verify_ab.txt', %s)", (json.dumps([item]),))
    cid = c.execute(
        "SELECT ch.chunk_id FROM rag.chunk AS ch JOIN rag.document AS d USING (document_id)"
        " WHERE d.tenant = 'verify_ab' AND d.doc_key = 'verify_ab.txt' ORDER BY d.version DESC LIMIT 1"
    ).fetchone()[0]
    c.execute(old_verify_sql())
    return cid, sentences


def case(n: int, cited_n: int, cid: int, sentences: list[str]) -> tuple[str, str, list[int]]:
    answer = " ".join(f"Sentence {i} [{i}]." for i in range(1, n + 1))
    cited = [
        {"n": i, "chunk_id": cid, "quote": sentences[i % 200] if i % 2 == 0 else f"not in the chunk {i}"}
        for i in range(1, cited_n + 1)
    ]
    return answer, json.dumps(cited), [cid]


def run(c: psycopg.Connection, fn: str, args: tuple) -> tuple[float, tuple]:
    t0 = time.perf_counter()
    row = c.execute(f"SELECT * FROM {fn}(%s, %s, %s)", args).fetchone()
    return time.perf_counter() - t0, row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with psycopg.connect(a.dsn, autocommit=True) as c:
        cid, sentences = setup(c)
        print(f"{'markers':>8} {'cited':>6} {'0.7.0 s':>9} {'0.8.0 s':>9} {'old/new':>8}  same")
        for n, cited_n in [(n, 10) for n in SIZES] + [(n, n) for n in SIZES]:
            args = case(n, cited_n, cid, sentences)
            times: dict[str, list[float]] = {"pg_temp.verify_070": [], "rag.verify": []}
            rows = {}
            for r in range(a.repeat):
                order = (
                    ("pg_temp.verify_070", "rag.verify")
                    if r % 2 == 0
                    else ("rag.verify", "pg_temp.verify_070")
                )
                for fn in order:
                    s, rows[fn] = run(c, fn, args)
                    times[fn].append(s)
            old, new = (statistics.median(times[f]) for f in ("pg_temp.verify_070", "rag.verify"))
            same = rows["pg_temp.verify_070"] == rows["rag.verify"]
            print(f"{n:>8} {cited_n:>6} {old:>9.3f} {new:>9.3f} {old / new:>8.1f}  {same}")


if __name__ == "__main__":
    main()
