"""Client-side ingest (pgcite.local + rag.store_parsed) vs rag.ingest, side by side in one run.

    PYTHONPATH=src .venv/bin/python bench/bench_client_side.py [--dsn DSN] [--rounds 1] [--eval] [--keep]

The 33 files of the four manual chapters the question set is about (eval/pgdocs-corpus.txt), into fresh
tenants of one database with pgcite_python (a private cluster under /var/tmp/pgcite-bench-client-side, or
--dsn):
rag.ingest (parse, chunk, embed in the backend, one call per file) and `Client(client_side=True).ingest` (the
same chunker and model in this process, then rag.store_parsed), alternating when --rounds > 1; then each
tenant's unchanged files again. Prints seconds, chunks/s, the client's split into parse + embed (prepare) and
the rest (the hash check, sending and storing), the embedding backend and whether torch was imported in
this process. Both sides embed with one thread (the setting torch_threads, PGCITE_EMBED_THREADS).
PGCITE_EMBED_BACKEND=torch measures the client's sentence-transformers fallback instead of the ONNX export.
--eval then runs `pgcite eval eval/pgdocs-dev.jsonl` on the last round's tenants: the in-database one with
questions embedded by the server, the client-side one with questions embedded by this client.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

import psycopg

import pgcite.local
from pgcite import Client
from pgcite.cluster import Cluster

ROOT = Path(__file__).resolve().parents[1]
MANUAL = next(iter(sorted(Path("/usr/share/doc").glob("postgresql-doc-*/html"))), Path("/nonexistent"))
HOME = Path("/var/tmp/pgcite-bench-client-side")
DB = "pgcite_bench_client"


def files() -> list[Path]:
    return [MANUAL / n for n in (ROOT / "eval" / "pgdocs-corpus.txt").read_text().split()]


def in_database(dsn: str, tenant: str) -> dict:
    out = {"chunks": 0, "statuses": {}}
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SELECT rag.create_tenant(%s)", (tenant,))
        t0 = time.perf_counter()
        for f in files():
            status, chunks = c.execute(
                "SELECT status, chunks FROM rag.ingest(%s, %s, %s, 'html')", (tenant, f.name, f.read_text())
            ).fetchone()
            out["chunks"] += chunks
            out["statuses"][status] = out["statuses"].get(status, 0) + 1
        out["seconds"] = time.perf_counter() - t0
    return out


def client_side(dsn: str, tenant: str) -> dict:
    out = {"chunks": 0, "statuses": {}, "prepare_seconds": 0.0}
    real = {name: getattr(pgcite.local.LocalPipeline, name) for name in ("parse", "embed_parsed")}

    def timed(name):
        def wrapper(self, *a, **k):
            t = time.perf_counter()
            try:
                return real[name](self, *a, **k)
            finally:
                out["prepare_seconds"] += time.perf_counter() - t

        return wrapper

    for name in real:
        setattr(pgcite.local.LocalPipeline, name, timed(name))
    try:
        with Client(dsn, client_side=True) as c:
            c.create_tenant(tenant)
            t0 = time.perf_counter()
            c.check_client_side()
            pipeline = pgcite.local.shared_pipeline()
            out["backend"] = pipeline.backend  # loads the model: counted, as the first file would
            for f in files():
                r = c.ingest(tenant, f.name, f.read_text(), "html")
                out["chunks"] += r.chunks
                out["statuses"][r.status] = out["statuses"].get(r.status, 0) + 1
            out["seconds"] = time.perf_counter() - t0
    finally:
        for name, f in real.items():
            setattr(pgcite.local.LocalPipeline, name, f)
    return out


EVAL_KEYS = [
    ("retrieval_hit_at_1", "retrieval hit@1"),
    ("retrieval_hit_at_3", "retrieval hit@3"),
    ("hit_at_1", "citation hit@1"),
    ("answer_contains", "answer_contains"),
    ("false_abstain", "false abstain"),
    ("false_answer", "false answer"),
    ("quotes_verified", "quotes verified"),
]


def evaluate(dsn: str, tenant: str, client_side: bool) -> dict:
    """`pgcite eval eval/pgdocs-dev.jsonl --json` (every split, the default gate): questions embedded by the
    server (rag.embed) or by this client (--client-side)."""
    import contextlib
    import io

    from pgcite.cli import main as cli

    out = io.StringIO()
    argv = ["eval", str(ROOT / "eval" / "pgdocs-dev.jsonl"), "--tenant", tenant, "--dsn", dsn, "--json"]
    with contextlib.redirect_stderr(io.StringIO()):
        rc = cli([*argv, "--no-progress", *(["--client-side"] if client_side else [])], out=out)
    if rc != 0:
        raise SystemExit(f"bench_client_side: pgcite eval exited {rc}")
    return json.loads(out.getvalue())


def line(name: str, r: dict) -> str:
    rate = r["chunks"] / r["seconds"] if r["chunks"] else 0.0
    extra = ""
    if "prepare_seconds" in r:
        extra = (
            f"  (parse+embed {r['prepare_seconds']:.1f} s, hash check + send + store "
            f"{r['seconds'] - r['prepare_seconds']:.1f} s; backend {r.get('backend')})"
        )
    head = f"{name:34} {r['seconds']:7.2f} s  {r['chunks']:4} chunks  {rate:5.1f} chunks/s"
    return f"{head}  {r['statuses']}{extra}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", help="a database with pgcite_python (default: a private cluster)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the private cluster running afterwards")
    ap.add_argument("--eval", action="store_true", help="then pgcite eval the dev set on both tenants")
    args = ap.parse_args()
    cluster = None
    dsn = args.dsn
    if not dsn:
        cluster = Cluster(HOME)
        cluster.init()
        cluster.start()
        cluster.ensure_database(DB, python=True)
        dsn = cluster.dsn(DB)
    try:
        results = []
        for r in range(args.rounds):
            tag = uuid.uuid4().hex[:6]
            order = ["db", "client"] if r % 2 == 0 else ["client", "db"]
            got = {}
            for side in order:
                tenant = f"bench_{side}_{tag}"
                got[side + "_tenant"] = tenant
                got[side] = (in_database if side == "db" else client_side)(dsn, tenant)
                got[side + "_again"] = (in_database if side == "db" else client_side)(dsn, tenant)
            results.append(got)
            print(f"round {r + 1} (first: {order[0]})")
            print(line("rag.ingest", got["db"]))
            print(line("client-side + rag.store_parsed", got["client"]))
            print(line("rag.ingest, unchanged again", got["db_again"]))
            print(line("client-side, unchanged again", got["client_again"]))
        if args.eval:
            last = results[-1]
            runs = [
                ("rag.ingest, questions by rag.embed", "db", False),
                ("client-side ingest, questions by the client", "client", True),
            ]
            print(
                f"{'pgcite eval eval/pgdocs-dev.jsonl':46}"
                + "".join(f"{label:>17}" for _, label in EVAL_KEYS)
            )
            for name, side, local in runs:
                figures = evaluate(dsn, last[side + "_tenant"], local)
                cells = "".join(
                    f"{figures[k]:>17.3f}" if isinstance(figures[k], float) else f"{figures[k]:>17}"
                    for k, _ in EVAL_KEYS
                )
                print(f"{name:46}{cells}")
        print(f"torch imported in this process: {'torch' in sys.modules}")
        print(json.dumps(results, default=str))
    finally:
        if cluster is not None and not args.keep:
            cluster.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
