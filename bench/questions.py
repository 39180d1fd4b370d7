"""Questions per tenant size class with exact-search ground truth, for the scale benchmark.

    .venv/bin/python bench/questions.py [--db pgcite_bench] [--per-class 100] [--seed 1]

Classes: `largest` (tenant big, 35 % of the corpus), `1%` (tenants pct01-pct03) and `tiny` (tiny01-tiny10,
0.04 % each). Each class gets half real questions (eval/pgdocs-dev.jsonl, in turn over its tenants) and half
perturbed chunk texts: a sentence of a random chunk of the tenant with a fifth of its words dropped, two
neighbours swapped and sometimes a question opening ("How does ... ?").

Every question is embedded once in the database the way rag.ask embeds it: rag.embed of the typo-corrected
question when a word was corrected (rag.correct_question, rag._embedding_text), else of the question. Ground
truth: the exact cosine top 10 of the tenant's live chunks for that embedding (a sequential scan: index scans
off, so HNSW is not used). Stored in pgcite_bench.question (which the pgbench script reads too); a second run
with the same corpus, size per class and seed keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import READER, connect, log  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLASS_TENANTS = {
    "largest": ["big"],
    "1%": ["pct01", "pct02", "pct03"],
    "tiny": [f"tiny{i:02d}" for i in range(1, 11)],
}
K = 10
OPENINGS = ["", "", "How does ", "What about ", "Why ", "Explain "]


def dev_questions() -> list[str]:
    lines = (ROOT / "eval" / "pgdocs-dev.jsonl").read_text().splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


def perturb(content: str, rnd: random.Random) -> str | None:
    """A question-like variation of one sentence of a chunk: words dropped and swapped, maybe an opening."""
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", content)]
    sentences = [s for s in sentences if 6 <= len(s.split()) <= 60 and not s.startswith(("|", "```"))]
    if not sentences:
        return None
    words = rnd.choice(sentences).rstrip(".!?:;").split()
    kept = [w for w in words if rnd.random() > 0.2] or words
    if len(kept) >= 3:
        i = rnd.randrange(len(kept) - 1)
        kept[i], kept[i + 1] = kept[i + 1], kept[i]
    opening = rnd.choice(OPENINGS)
    text = " ".join(kept)[:400]
    return f"{opening}{text[0].lower()}{text[1:]}?" if opening else text


def current_corpus(conn) -> str:
    row = conn.execute(
        "SELECT size, seed, loaded_at FROM pgcite_bench.corpus ORDER BY loaded_at DESC LIMIT 1"
    )
    row = row.fetchone()
    if row is None:
        sys.exit("questions: no corpus in this database; run bench/corpus.py first")
    return f"{row[0]}/{row[1]}/{row[2].isoformat()}"


def ensure(dbname: str = "pgcite_bench", per_class: int = 100, seed: int = 1) -> int:
    """The question set for the database's corpus (built unless already there); returns its size."""
    with connect(dbname) as conn:
        corpus = current_corpus(conn)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS pgcite_bench.question_set (corpus text, per_class integer, "
            "seed integer, seconds float8, made_at timestamptz DEFAULT now())"
        )
        conn.execute(
            """CREATE TABLE IF NOT EXISTS pgcite_bench.question (
                   id integer PRIMARY KEY, class text NOT NULL, tenant text NOT NULL, kind text NOT NULL,
                   question text NOT NULL, embed_text text NOT NULL, qemb vector(384) NOT NULL,
                   gt_ids bigint[] NOT NULL, gt_dist float8[] NOT NULL)"""
        )
        conn.execute(f"GRANT SELECT ON pgcite_bench.question TO {READER}")
        have = conn.execute("SELECT corpus, per_class, seed FROM pgcite_bench.question_set").fetchone()
        if have == (corpus, per_class, seed):
            n = conn.execute("SELECT count(*) FROM pgcite_bench.question").fetchone()[0]
            log(f"{n} questions already made for this corpus")
            return n
        t0 = time.perf_counter()
        rnd = random.Random(seed)
        dev = dev_questions()
        rows = []  # (class, tenant, kind, question)
        for cls, tenants in CLASS_TENANTS.items():
            n_real = per_class // 2
            start = rnd.randrange(len(dev))
            for i in range(n_real):
                rows.append((cls, tenants[i % len(tenants)], "dev", dev[(start + i) % len(dev)]))
            ids = {
                t: [
                    r[0]
                    for r in conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = %s ORDER BY 1", (t,))
                ]
                for t in tenants
            }
            made = 0
            while made < per_class - n_real:
                t = tenants[made % len(tenants)]
                content = conn.execute(
                    "SELECT content FROM rag.chunk WHERE chunk_id = %s", (rnd.choice(ids[t]),)
                ).fetchone()[0]
                q = perturb(content, rnd)
                if q:
                    rows.append((cls, t, "chunk", q))
                    made += 1
        log(f"embedding {len(rows)} questions in the database")
        texts = [
            conn.execute(
                "SELECT rag._embedding_text(%s, rag.correct_question(%s, %s))", (q, q, t)
            ).fetchone()[0]
            for _, t, _, q in rows
        ]
        qembs = [
            r[1]
            for r in conn.execute(
                "SELECT ord, embedding::text FROM rag.embed_many(%s::text[]) ORDER BY ord", (texts,)
            ).fetchall()
        ]
        log("exact ground truth (sequential scans)")
        out = []
        with conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")
            conn.execute("SET LOCAL enable_indexonlyscan = off")
            for i, ((cls, t, kind, q), text, e) in enumerate(zip(rows, texts, qembs, strict=True), start=1):
                gt = conn.execute(
                    """SELECT chunk_id, embedding <=> %s::vector AS d FROM rag.chunk
                       WHERE tenant = %s AND retired_at IS NULL ORDER BY d, chunk_id LIMIT %s""",
                    (e, t, K),
                ).fetchall()
                out.append((i, cls, t, kind, q, text, e, [g[0] for g in gt], [g[1] for g in gt]))
        with conn.transaction():
            conn.execute("TRUNCATE pgcite_bench.question, pgcite_bench.question_set")
            with conn.cursor().copy(
                "COPY pgcite_bench.question "
                "(id, class, tenant, kind, question, embed_text, qemb, gt_ids, gt_dist) FROM STDIN"
            ) as cp:
                for r in out:
                    cp.write_row(r)
            seconds = time.perf_counter() - t0
            conn.execute(
                "INSERT INTO pgcite_bench.question_set (corpus, per_class, seed, seconds) "
                "VALUES (%s, %s, %s, %s)",
                (corpus, per_class, seed, seconds),
            )
        log(f"{len(out)} questions with ground truth in {seconds:.0f} s")
        return len(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=os.environ.get("BENCH_DB", "pgcite_bench"))
    ap.add_argument("--per-class", type=int, default=int(os.environ.get("QUESTIONS", "100")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SEED", "1")))
    args = ap.parse_args()
    try:
        print(ensure(args.db, args.per_class, args.seed))
    except psycopg.Error as e:
        sys.exit(f"questions: {e}")


if __name__ == "__main__":
    main()
