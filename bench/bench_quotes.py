"""Answer quality on the four manual chapters in one command (issue #11): ingest, calibrate, evaluate.

    PYTHONPATH=src .venv/bin/python bench/bench_quotes.py [--dsn DSN] [--keep] [--out DIR]

1. A database `pgcite_quotes` (dropped and created again unless --keep) on the cluster of --dsn /
   $DATABASE_URL, else on a private cluster under /var/tmp/pgcite-bench-quotes (started if needed), with
   pgcite and pgcite_python as installed (`make install` first).
2. Tenant `pgdocs`: the 33 files of eval/pgdocs-corpus.txt from Debian's manual (as tests/test_manual.py).
3. `rag.calibrate` on the calibration splits of eval/pgdocs-dev.jsonl and eval/offtopic.jsonl (what
   `pgcite calibrate` does; since #11 round 6 its rule uses every labelled negative); with
   --calibrate-dev-only on the dev set's only (its 7 hard negatives), as before round 6.
4. `pgcite eval`'s scoring on the calibration and test splits of eval/pgdocs-dev.jsonl and
   eval/offtopic.jsonl; one table, and with --out each run's per-question results as JSON (misses: the
   answer given next to answer_has).
5. With --core: the same chunks (content, embedding, anchor, title; no sentences) stored by
   rag.store_document in a database with the core extension only (`pgcite_quotes_core`), the gate opened
   (min_score 0), and the dev splits asked with the question's embedding passed: quote choice on the lexical
   path (spans split in SQL, scored lexically), to compare answer_contains with the PL/Python path.

--weights '{"section": 0.1}' runs with those values of rag._quote_weights() (the weights of quote choice)
replaced in both databases for the run and restored after it (needs a superuser: the private cluster's), for
the grids of docs/BENCHMARKS.md; --settings '{"weight_fts": 0.3}' likewise sets rag.set_config values (the
retrieval settings: rrf_k, weight_vector, weight_fts, weight_trgm, ...) in both databases for the run,
calibration included, and restores them after. *ms/ask* is the mean client-side time of one rag.ask
(embedding included on the PL/Python path, passed on the core path).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import psycopg

from pgcite.client import Client
from pgcite.cluster import Cluster
from pgcite.evaluate import load_questions, run, summarize

ROOT = Path(__file__).resolve().parents[1]
MANUAL = next(iter(sorted(Path("/usr/share/doc").glob("postgresql-doc-*/html"))), Path("/nonexistent"))
DB = "pgcite_quotes"
TENANT = "pgdocs"
RUNS = [
    ("pgdocs-dev.jsonl", "calibration"),
    ("pgdocs-dev.jsonl", "test"),
    ("offtopic.jsonl", "calibration"),
    ("offtopic.jsonl", "test"),
]


def server_dsn(args: argparse.Namespace) -> str:
    """The DSN of the maintenance database of the server to use."""
    given = args.dsn or os.environ.get("DATABASE_URL")
    if given:
        return psycopg.conninfo.make_conninfo(given, dbname="postgres")
    cluster = Cluster(Path(args.home))
    cluster.init()
    cluster.start()
    return cluster.dsn("postgres")


def prepare(admin_dsn: str, keep: bool) -> tuple[str, float]:
    """Creates (or keeps) the database with the extensions and the chapters ingested; the ingest's seconds."""
    dsn = psycopg.conninfo.make_conninfo(admin_dsn, dbname=DB)
    with psycopg.connect(admin_dsn, autocommit=True) as a:
        exists = a.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB,)).fetchone() is not None
        if exists and not keep:
            a.execute(f'DROP DATABASE "{DB}" WITH (FORCE)')
        if not exists or not keep:
            a.execute(f'CREATE DATABASE "{DB}"')
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS fuzzystrmatch SCHEMA public")
        c.execute("CREATE EXTENSION IF NOT EXISTS pgcite CASCADE")
        c.execute("CREATE EXTENSION IF NOT EXISTS pgcite_python CASCADE")
        venv = os.environ.get("PGCITE_DB_VENV")
        if venv:
            c.execute("SELECT rag.set_config('python_path', %s)", (venv,))
    t0 = time.perf_counter()
    with Client(dsn) as client:
        client.create_tenant(TENANT)
        for name in (ROOT / "eval" / "pgdocs-corpus.txt").read_text().split():
            res = client.ingest(TENANT, name, (MANUAL / name).read_text(), "html")
            if res.status == "failed":
                raise SystemExit(f"ingest of {name} failed: {res}")
    return dsn, time.perf_counter() - t0


def prepare_core(admin_dsn: str, dsn: str) -> str:
    """The core-only database: the Python database's chunks stored without sentences; the gate opened."""
    core = DB + "_core"
    with psycopg.connect(admin_dsn, autocommit=True) as a:
        a.execute(f'DROP DATABASE IF EXISTS "{core}" WITH (FORCE)')
        a.execute(f'CREATE DATABASE "{core}"')
    core_dsn = psycopg.conninfo.make_conninfo(admin_dsn, dbname=core)
    with psycopg.connect(dsn) as src, psycopg.connect(core_dsn, autocommit=True) as c:
        c.execute("CREATE EXTENSION pgcite CASCADE")
        c.execute("SELECT rag.create_tenant(%s)", (TENANT,))
        c.execute("SELECT rag.set_config('min_score', '0')")
        docs = src.execute(
            "SELECT c.doc_key, jsonb_agg(jsonb_build_object('content', c.content, 'embedding',"
            " c.embedding::text::jsonb, 'anchor', c.anchor, 'section_path', c.section_path, 'title', c.title)"
            " ORDER BY c.chunk_index) FROM rag.chunk AS c JOIN rag.document AS d USING (document_id)"
            " WHERE d.tenant = %s AND d.retired_at IS NULL GROUP BY c.doc_key ORDER BY c.doc_key",
            (TENANT,),
        ).fetchall()
        for key, items in docs:
            c.execute(
                "SELECT * FROM rag.store_document(%s, %s, %s)", (TENANT, key, psycopg.types.json.Jsonb(items))
            )
    return core_dsn


WEIGHTS_SQL = (
    "CREATE OR REPLACE FUNCTION rag._quote_weights() RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE"
    " SET search_path = pg_catalog, pg_temp AS $w$ SELECT %s::jsonb $w$"
)


@contextlib.contextmanager
def quote_weights(dsns: list[str], override: dict) -> Iterator[None]:
    """rag._quote_weights() with `override` merged in, in each database, for the block; restored after."""
    saved = []
    try:
        for dsn in dsns:
            with psycopg.connect(dsn, autocommit=True) as c:
                now = c.execute("SELECT rag._quote_weights()").fetchone()[0]
                saved.append((dsn, now))
                literal = psycopg.sql.Literal(json.dumps({**now, **override})).as_string(c)
                c.execute(WEIGHTS_SQL % literal)
        yield
    finally:
        for dsn, now in saved:
            with psycopg.connect(dsn, autocommit=True) as c:
                c.execute(WEIGHTS_SQL % psycopg.sql.Literal(json.dumps(now)).as_string(c))


@contextlib.contextmanager
def settings(dsns: list[str], values: dict) -> Iterator[None]:
    """rag.set_config of each of `values` in each database for the block (retrieval settings such as
    weight_fts); each setting as it was (rag.config's value, or none: the default) restored after."""
    saved = []
    try:
        for dsn in dsns:
            with psycopg.connect(dsn, autocommit=True) as c:
                for name, value in values.items():
                    was = c.execute("SELECT value FROM rag.config WHERE name = %s", (name,)).fetchone()
                    saved.append((dsn, name, was[0] if was else None))
                    c.execute("SELECT rag.set_config(%s, %s)", (name, str(value)))
        yield
    finally:
        for dsn, name, was in saved:
            with psycopg.connect(dsn, autocommit=True) as c:
                c.execute("SELECT rag.set_config(%s, %s)", (name, was))


class Timed:
    """An ask function that adds up its wall time."""

    def __init__(self, ask):
        self.ask, self.seconds, self.calls = ask, 0.0, 0

    def __call__(self, text: str) -> object:
        t0 = time.perf_counter()
        try:
            return self.ask(text)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1

    def ms(self) -> float:
        return 1000 * self.seconds / max(self.calls, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", help="a server to use (its maintenance database); default: a private cluster")
    ap.add_argument("--home", default="/var/tmp/pgcite-bench-quotes", help="the private cluster's directory")
    ap.add_argument("--keep", action="store_true", help="reuse the database if it exists")
    ap.add_argument("--out", help="directory for per-question JSON of each run")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--options", default="{}", help="rag.ask options as JSON, e.g. '{\"max_quotes\": 3}'")
    ap.add_argument("--calibration-only", action="store_true", help="only the calibration splits")
    ap.add_argument("--weights", default="{}", help="rag._quote_weights() values for the run, as JSON")
    ap.add_argument(
        "--settings",
        default="{}",
        help="rag.set_config values for the run, as JSON, e.g. '{\"weight_fts\": 0.3}'",
    )
    ap.add_argument(
        "--core", action="store_true", help="also the core-only lexical path (dev set, gate open)"
    )
    ap.add_argument(
        "--calibrate-dev-only",
        action="store_true",
        help="rag.calibrate on the dev set's calibration split only (default: and offtopic.jsonl's)",
    )
    args = ap.parse_args()

    admin = server_dsn(args)
    dsn, ingest_s = prepare(admin, args.keep)
    print(f"database {DB}, tenant {TENANT}: ingest {ingest_s:.0f} s", file=sys.stderr)
    weights = json.loads(args.weights)
    core_dsn = prepare_core(admin, dsn) if args.core else None
    rows = []
    with (
        quote_weights([x for x in (dsn, core_dsn) if x], weights) if weights else contextlib.nullcontext(),
        settings([x for x in (dsn, core_dsn) if x], json.loads(args.settings)),
        Client(dsn) as client,
    ):
        calib = load_questions(ROOT / "eval" / "pgdocs-dev.jsonl", "calibration")
        if not args.calibrate_dev_only:
            calib += load_questions(ROOT / "eval" / "offtopic.jsonl", "calibration")
        client.calibrate(TENANT, [q.for_calibrate() for q in calib])
        gate = client.tenant_gate(TENANT)
        min_score = gate.get("min_score")
        options = json.loads(args.options)
        for file, split in RUNS:
            if args.calibration_only and split != "calibration":
                continue
            questions = load_questions(ROOT / "eval" / file, split)
            timed = Timed(lambda text: client.ask(text, TENANT, k=args.k, options=options))
            results = run(timed, questions)
            s = summarize(results)
            rows.append((file, split, s, results, timed.ms()))
            if args.out:
                out = Path(args.out)
                out.mkdir(parents=True, exist_ok=True)
                dump = {"summary": s, "per_question": [asdict(r) for r in results]}
                name = f"{file.split('.')[0]}-{split}.json"
                (out / name).write_text(json.dumps(dump, indent=1, default=str))
        if core_dsn:
            with Client(core_dsn) as core:
                for split in ("calibration",) if args.calibration_only else ("calibration", "test"):
                    questions = load_questions(ROOT / "eval" / "pgdocs-dev.jsonl", split)

                    embed_first = {}  # the embedding is computed before the clock starts
                    for q in questions:
                        embed_first[q.question] = client.connection.execute(
                            "SELECT rag.embed(%s)::text", (q.question,)
                        ).fetchone()[0]

                    def ask_core(text: str, embs: dict = embed_first) -> object:
                        return core.ask(
                            text, TENANT, k=args.k, query_embedding=json.loads(embs[text]), options=options
                        )

                    timed = Timed(ask_core)
                    results = run(timed, questions)
                    if args.out:
                        dump = {"summary": summarize(results), "per_question": [asdict(r) for r in results]}
                        name = f"pgdocs-dev-core-{split}.json"
                        (Path(args.out) / name).write_text(json.dumps(dump, indent=1, default=str))
                    rows.append(
                        (
                            "pgdocs-dev.jsonl (core, lexical, gate open)",
                            split,
                            summarize(results),
                            results,
                            timed.ms(),
                        )
                    )

    def pct(v: float | None) -> str:
        return "–" if v is None else f"{v:.3f}"

    on = "pgdocs-dev" if args.calibrate_dev_only else "pgdocs-dev + offtopic"
    print(
        f"min_score (calibrated on {on} calibration) {float(min_score):.6f}: rule {gate.get('rule')}, "
        f"bandwidth {json.dumps(gate.get('bandwidth'))}, expected false abstain / answer "
        f"{gate.get('expected_false_abstain')} / {gate.get('expected_false_answer')}; on the calibration "
        f"questions {gate.get('false_abstain')} / {gate.get('false_answer')}"
    )
    if weights:
        print(f"rag._quote_weights() for this run: {json.dumps(weights)} over the installed values")
    print(
        "| set | split | retrieval hit@1 | citation hit@1 | answer_contains | false abstain "
        "| off-topic answered | answer chars | quotes | ms/ask |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for file, split, s, results, ms in rows:
        answers = [r for r in results if r.answerable and r.answered]
        chars = f"{sum(len(r.answer or '') for r in answers) / len(answers):.0f}" if answers else "–"
        quotes = f"{sum(r.citations for r in answers) / len(answers):.2f}" if answers else "–"
        fa = f"{s['false_abstain']} / {s['answerable']}" if s["answerable"] else "–"
        off = f"{s['false_answer']} / {s['unanswerable']} ({100 * s['false_answer_rate']:.1f} %)"
        print(
            f"| {file} | {split} | {pct(s['retrieval_hit_at_1'])} | {pct(s['hit_at_1'])} | "
            f"{pct(s['answer_contains'])} | {fa} | {off} | {chars} | {quotes} | {ms:.0f} |"
        )
    bad = [s for _, _, s, _, _ in rows if s["errors"] or (s["quotes_verified"] not in (None, 1.0))]
    print(f"every quote verified: {'yes' if not bad else 'NO'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
