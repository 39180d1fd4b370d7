"""The gate's answered off-topic questions, and gate variants recomputed offline (issue #11, gate round 8).

    PYTHONPATH=src .venv/bin/python bench/bench_quotes.py --calibration-only --keep --out DIR
    PYTHONPATH=src .venv/bin/python bench/gate_variants.py --dsn 'host=… dbname=pgcite_quotes' DIR

Reads the calibration splits' per-question JSON that bench_quotes.py wrote to DIR and, from the database it
ran on (kept with --keep), each ask's logged evidence (rag.ask_log: the gate's signals and words, the fused
chunks), the tenant's lexeme frequencies (rag.tenant_lexeme) and the question embeddings. Prints

1. the off-topic and hard negatives the gate answered (and the ones just below the threshold): score, signals,
   each question word with its standing (found, generic, bound) and in how many live chunks it occurs, and the
   answerable questions scored nearest below and above;
2. variants of the gate score recomputed from those inputs, each with the threshold that
   rag._calibration_threshold (rag.calibrate's rule, run in the database) chooses on the recomputed scores,
   and the false abstentions and off-topic questions answered at it.

Nothing is stored; the variants never change the database. Choose on the calibration split only.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

import psycopg

TENANT = "pgdocs"
PASSAGES = 3  # rag.ask's default number of passages: the ones the gate's coverage reads


def load(conn: psycopg.Connection, out: Path) -> tuple[dict, dict, int]:
    qs: dict[str, dict] = {}
    for name in ("pgdocs-dev-calibration.json", "offtopic-calibration.json"):
        for q in json.loads((out / name).read_text())["per_question"]:
            qs[q["id"]] = q
    live = conn.execute(
        "SELECT count(*) FROM rag.chunk AS c JOIN rag.document AS d USING (document_id)"
        " WHERE d.tenant = %s AND d.retired_at IS NULL",
        (TENANT,),
    ).fetchone()[0]
    df = dict(conn.execute("SELECT lexeme, live_chunks FROM rag.tenant_lexeme WHERE tenant = %s", (TENANT,)))
    for q in qs.values():
        ev, ids, mean_sim = conn.execute(
            "SELECT l.evidence, l.chunk_ids, (SELECT avg(1 - (c.embedding <=> l.query_embedding))"
            " FROM rag.chunk AS c JOIN rag.document AS d USING (document_id)"
            " WHERE d.tenant = l.tenant AND d.retired_at IS NULL)"
            " FROM rag.ask_log AS l WHERE l.ask_id = %s",
            (q["ask_id"],),
        ).fetchone()
        q["gate"], q["chunks"], q["mean_sim"] = ev["gate"], ev["chunks"], mean_sim
        words = [w["word"] for w in q["gate"]["words"]]
        # occurrences of each question lexeme in the gate's passages
        q["tf"] = dict(
            conn.execute(
                "SELECT u.lexeme, sum(coalesce(array_length(u.positions, 1), 1))::int"
                " FROM rag.chunk AS c, unnest(c.tsv) AS u WHERE c.chunk_id = ANY (%s) AND u.lexeme = ANY (%s)"
                " GROUP BY u.lexeme",
                (ids[:PASSAGES], words),
            )
        )
    return qs, df, live


WEIGHTS = (1.75, 1.0, 0.5)  # rag._answer's weights of similarity, coverage and sentence (#11 gate round 8)


def combine(s: dict, cov: float, p: float = 0.0, weights: tuple = WEIGHTS) -> float:
    """The gate score from its signals with coverage replaced: the weighted geometric mean (p = 0, as
    rag._answer) or a weighted power mean of similarity, coverage and sentence, times the names penalty."""
    vals = [(max(s["similarity"] or 0, 1e-6), weights[0]), (max(cov, 1e-6), weights[1])]
    if s.get("sentence"):
        vals.append((s["sentence"], weights[2]))
    total = sum(w for _, w in vals)
    if p == 0:
        g = math.exp(sum(w * math.log(v) for v, w in vals) / total)
    else:
        g = (sum(w * v**p for v, w in vals) / total) ** (1 / p)
    names = s.get("names")
    return g * max(1 if names is None else names, 0.25) ** 0.25


def coverage(q: dict, df: dict, live: int, tau: float = 0.15) -> float:
    """rag._coverage's formula from the logged words, (specific found + 0.5) / (specific + 1), with a word
    generic above tau of the live chunks (0.15 as shipped)."""
    ws = [w for w in q["gate"]["words"] if df.get(w["word"], 0) <= tau * live]
    found = sum(1 for w in ws if w["found"] and not w["bound"])
    return (found + 0.5) / (len(ws) + 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", required=True, help="the database bench_quotes.py ran on (pgcite_quotes)")
    ap.add_argument("out", help="bench_quotes.py's --out directory of that run")
    args = ap.parse_args()
    conn = psycopg.connect(args.dsn, autocommit=True)
    qs, df, live = load(conn, Path(args.out))
    neg = {i for i, q in qs.items() if q["kind"] == "out_of_corpus"}
    threshold = next(iter(qs.values()))["threshold"]

    def thr(pos: list[float], negs: list[float]) -> float:
        return conn.execute(
            "SELECT (rag._calibration_threshold(%s::float8[], %s::float8[], 2) ->> 'min_score')::float8",
            (pos, negs),
        ).fetchone()[0]

    # 1. the negatives answered, with the answerable questions nearest to them
    score = {i: q["gate"]["signals"]["score"] for i, q in qs.items()}
    answerable = sorted((score[i], i) for i in qs if i not in neg)
    print(f"threshold {threshold:.6f}; {live} live chunks; generic above {0.15 * live:.1f} of them\n")
    print(
        "| question | score | similarity | coverage | sentence | names "
        "| words (df; - not found, G generic, B bound) | answerable just below / above |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for i in sorted((i for i in neg if score[i] >= threshold - 0.01), key=lambda i: -score[i]):
        q, s = qs[i], qs[i]["gate"]["signals"]
        words = " ".join(
            f"{w['word']}{'' if w['found'] else '-'}{'G' if w['generic'] else ''}{'B' if w['bound'] else ''}"
            f":{df.get(w['word'], 0)}"
            for w in q["gate"]["words"]
        )
        below = max(((v, a) for v, a in answerable if v <= score[i]), default=(None, "–"))
        above = min(((v, a) for v, a in answerable if v > score[i]), default=(None, "–"))
        near = " / ".join(f"{a} {v:.3f}" if v is not None else "–" for v, a in (below, above))
        mark = "" if score[i] >= threshold else " (abstains)"
        print(
            f"| {i} {q['question']}{mark} | {score[i]:.3f} | {s['similarity']:.3f} | {s['coverage']:.3f} | "
            f"{s.get('sentence') or 0:.3f} | {s.get('names')} | {words} | {near} |"
        )

    # 2. variants
    def idf(w: dict) -> float:
        return math.log(live / max(df.get(w["word"], 0), 1))

    def fts_best(q: dict) -> float:
        return min(1.0, max(0.05, max([c["fts_score"] or 0 for c in q["chunks"][:5]] or [0])))

    def fts_share(q: dict) -> float:
        return (sum(1 for c in q["chunks"][:5] if c["fts_rank"]) + 1) / 6

    variants: list[tuple[str, Callable[[dict], float]]] = [
        ("as shipped", lambda q: q["gate"]["signals"]["score"])
    ]
    for tau in (0.12, 0.10, 0.08, 0.06):
        variants.append(
            (
                f"generic above {tau:.0%} of chunks",
                lambda q, t=tau: combine(q["gate"]["signals"], coverage(q, df, live, tau=t)),
            )
        )
    for c in (1.5, 2, 3, 4, 6):
        variants.append(
            (
                f"coverage weighted by idf, prior mass {c}",
                lambda q, c=c: combine(q["gate"]["signals"], idf_cov(q, c)),
            )
        )
    for m in (1.5, 2, 3):
        variants.append(
            (
                f"a found word counts min(1, occurrences / {m})",
                lambda q, m=m: combine(q["gate"]["signals"], occ_cov(q, m)),
            )
        )
    for p in (-2, -1, -0.5, 0.5, 1):
        variants.append(
            (
                f"power mean p = {p}",
                lambda q, p=p: combine(q["gate"]["signals"], q["gate"]["signals"]["coverage"], p),
            )
        )
    for a, c in ((1, 1), (1.5, 0.5), (2, 0.5), (2, 0.25), (2.5, 0.25), (1.75, 0.25), (1.75, 0.75)):
        variants.append(
            (
                f"weights {a} / 1 / {c} (similarity / coverage / sentence)",
                lambda q, a=a, c=c: combine(
                    q["gate"]["signals"], q["gate"]["signals"]["coverage"], weights=(a, 1, c)
                ),
            )
        )
    for lam in (0.25, 0.5, 1):
        variants.append(
            (
                f"similarity − {lam} × mean similarity to the corpus",
                lambda q, lam=lam: combine(
                    {
                        **q["gate"]["signals"],
                        "similarity": max(q["gate"]["signals"]["similarity"] - lam * q["mean_sim"], 1e-6),
                    },
                    q["gate"]["signals"]["coverage"],
                ),
            )
        )
    for x in (0.05, 0.1, 0.2):
        variants.append(
            (
                f"× (best ts score of the top 5) ^ {x}",
                lambda q, x=x: q["gate"]["signals"]["score"] * fts_best(q) ** x,
            )
        )
        variants.append(
            (
                f"× (share of the top 5 the FTS leg found) ^ {x}",
                lambda q, x=x: q["gate"]["signals"]["score"] * fts_share(q) ** x,
            )
        )

    def idf_cov(q: dict, c: float) -> float:
        ws = [w for w in q["gate"]["words"] if not w["generic"]]
        found = sum(idf(w) for w in ws if w["found"] and not w["bound"])
        return (found + 0.5 * c) / (sum(idf(w) for w in ws) + c)

    def occ_cov(q: dict, m: float) -> float:
        ws = [w for w in q["gate"]["words"] if not w["generic"]]
        found = sum(min(1.0, q["tf"].get(w["word"], 0) / m) for w in ws if w["found"] and not w["bound"])
        return (found + 0.5) / (len(ws) + 1)

    n_pos, n_off = len(qs) - len(neg), sum(1 for i in neg if i.startswith("off-"))
    n_hard = len(neg) - n_off
    print(
        f"\n| variant | threshold | false abstain / {n_pos} | off-topic answered / {n_off} "
        f"| hard / {n_hard} |"
    )
    print("|---|---|---|---|---|")
    for label, f in variants:
        sc = {i: f(q) for i, q in qs.items()}
        t = thr([sc[i] for i in qs if i not in neg], [sc[i] for i in neg])
        fa = sorted(i for i in qs if i not in neg and sc[i] < t)
        off = sorted(i for i in neg if i.startswith("off-") and sc[i] >= t)
        hard = sorted(i for i in neg if not i.startswith("off-") and sc[i] >= t)
        print(f"| {label} | {t:.4f} | {len(fa)} ({', '.join(fa)}) | {len(off)} | {len(hard)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
