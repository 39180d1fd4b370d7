"""The cost of holding a generated answer to proof, without the model's time.

    DATABASE_URL=... .venv/bin/python bench/bench_generate.py [--tenant tiny] [--questions 20]

A local chat-completions server (tests/chat_server.py) stands in for the model and answers at once, from the
sources of the prompt, in three ways: an answer of three sentences citing sources 1-3 (each sentence restated,
so MiniLM embeds the 3 sentences; the quotes are whole sentences, whose embeddings were stored at ingest); the
same with one fabricated citation among them (removed); and a reply whose second sentence no quote supports
(checked, rejected, retried with the errors, rejected again: two enforcements). The questions are "What is
<section title>?" for the tenant's sections that pass the gate.

Reported per answer: enforce_ms from the audit log (rag._enforce_reply: parsing, citation numbers, quotes
found by rag.verify, sentences, support with MiniLM; summed over attempts); "cached", the checks of the last
reply run again in the same backend, every vector at hand (the SQL part, parsing to verdict); overhead_ms, the
in-database time of a generated rag.ask beyond the extractive one (generate_ms minus the HTTP time of the
model's replies: prompt, sources, checks, retry bookkeeping); total_ms of rag.ask. Each kind of reply runs
in a new backend (model loaded before timing), so every sentence is embedded once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from chat_server import ChatServer, Reply, cited, sentences, sources_of  # noqa: E402
from common import connect, percentiles  # noqa: E402


def three(req: dict) -> list[tuple[int, str]]:
    src = sources_of(req)
    out = []
    for n in sorted(src):
        found = sentences(src[n])
        if found:
            out.append((n, found[0]))
        if len(out) == 3:
            break
    return out


def restated(s: str) -> str:
    return "In short, " + s[0].lower() + s[1:]


def answer3(req, attempt):
    picks = three(req)
    text = " ".join(f"{restated(s)} [{n}]" for n, s in picks)
    return Reply(cited(text, [{"n": n, "quote": s} for n, s in picks]))


def one_fabricated(req, attempt):
    picks = three(req)
    text = " ".join(f"{restated(s)} [{n}]" for n, s in picks) + " [5]"
    cites = [{"n": n, "quote": s} for n, s in picks] + [
        {"n": 5, "quote": "A quote that occurs in no source at all."}
    ]
    return Reply(cited(text, cites))


def unsupported(req, attempt):
    (n, s), *_ = three(req)
    return Reply(cited(f"{s} [{n}] The moon orbits Jupiter every Tuesday [{n}].", [{"n": n, "quote": s}]))


SCRIPTS = {"answer3": answer3, "one_fabricated": one_fabricated, "unsupported": unsupported}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tenant", default="tiny")
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    srv = ChatServer().start()
    results: dict[str, dict[str, list[float]]] = {}
    try:
        with connect() as conn:
            for name, script in SCRIPTS.items():
                conn.execute(
                    "SELECT rag.create_generator(%s, %s, 'bench', timeout_s => 30)",
                    (f"bench_{name}", srv.add(name, script)),
                )
            titles = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT title FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL"
                    " AND title <> '' ORDER BY title",
                    (args.tenant,),
                )
            ]
            conn.execute("SELECT rag.embed('warm up')")
            questions = []
            for (
                t
            ) in titles:  # those the gate lets through, and whose first three sources have quotable sentences
                q = f"What is {t.split('. ', 1)[-1]}?"
                row = conn.execute(
                    "SELECT status, evidence FROM rag.ask(%s, %s, options => %s)",
                    (q, args.tenant, json.dumps({"generator": "bench_answer3"})),
                ).fetchone()
                if row[0] == "answered":
                    questions.append(q)
                if len(questions) == args.questions:
                    break
        for name in SCRIPTS:
            # a backend of its own per reply kind: no text is in its cache of support vectors yet
            with connect() as conn:
                conn.execute("SELECT rag.embed('warm up')")
                enforce, overhead, total, cached = [], [], [], []
                for q in questions:
                    ask_id = conn.execute(
                        "SELECT ask_id FROM rag.ask(%s, %s, options => %s)",
                        (q, args.tenant, json.dumps({"generator": f"bench_{name}"})),
                    ).fetchone()[0]
                    ev, timings = conn.execute(
                        "SELECT evidence -> 'generation', timings FROM rag.ask_log WHERE ask_id = %s",
                        (ask_id,),
                    ).fetchone()
                    attempts = ev["attempts"]
                    enforce.append(sum(a.get("enforce_ms", 0) for a in attempts))
                    http = sum(a.get("elapsed_ms", 0) for a in attempts)
                    overhead.append(timings["generate_ms"] - http)
                    total.append(timings["total_ms"])
                    # the same checks again in this backend: every vector at hand, so what remains is SQL
                    sources = conn.execute(
                        "SELECT rag._generation_sources(chunk_ids[1:5]) FROM rag.ask_log WHERE ask_id = %s",
                        (ask_id,),
                    ).fetchone()[0]
                    raw = json.dumps(attempts[-1]["raw"])
                    t0 = time.perf_counter()
                    conn.execute(
                        "SELECT rag._enforce_reply(%s::jsonb, %s::jsonb, 0.7)", (json.dumps(sources), raw)
                    ).fetchone()
                    cached.append((time.perf_counter() - t0) * 1000)
                results[name] = {
                    "enforce_ms": enforce,
                    "overhead_ms": overhead,
                    "total_ms": total,
                    "enforce_cached_ms": cached,
                }
        with connect() as conn:
            for name in SCRIPTS:
                conn.execute("SELECT rag.drop_generator(%s)", (f"bench_{name}",))
    finally:
        srv.stop()
    report = {
        name: {k: {p: round(v, 1) for p, v in percentiles(vals).items()} for k, vals in r.items()}
        for name, r in results.items()
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{len(questions)} questions, tenant {args.tenant}")
    head = ("reply", "enforce_ms p50/p95", "cached p50/p95", "overhead_ms p50/p95", "total_ms p50")
    print(f"{head[0]:16} {head[1]:>20} {head[2]:>16} {head[3]:>21} {head[4]:>13}")
    for name, r in report.items():
        e, c, o, t = r["enforce_ms"], r["enforce_cached_ms"], r["overhead_ms"], r["total_ms"]
        print(
            f"{name:16} {e['p50']:>9} / {e['p95']:<8} {c['p50']:>7} / {c['p95']:<6} "
            f"{o['p50']:>9} / {o['p95']:<9} {t['p50']:>11}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
