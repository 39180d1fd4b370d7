"""Latency and recall per tenant size class at scale, against the bare pgvector query and a client-side peer.

    SIZE=100000 DURATION=60 .venv/bin/python bench/bench_scale.py

One command: builds or reuses the corpus (bench/corpus.py, SIZE chunks over 100 tenants of skewed sizes) and
the questions with exact ground truth (bench/questions.py), builds or reuses the peer's own table, then for
each tenant class (largest 35 %, 1 %, tiny 0.04 %) and each question, in a shuffled order per question, times
from psycopg on one connection each (model loaded before timing):

- `retrieve`: rag.retrieve(q, tenant, 8, query_embedding) as a pgcite_reader role;
- `ask`: rag.ask(q, tenant, 5), the question embedded in the database (the model in the backend);
- `ask+qemb`: rag.ask(q, tenant, 5, query_embedding);
- `embed`: rag.embed(q) as the reader: the question's embedding alone, in the database (rag.ask embeds the
  corrected question, of the same length but for a rare typo; on the backend's worker thread while the
  full-text and title legs run, so ask - ask+qemb is less than embed);
- `floor`: the bare pgvector query over rag.chunk, `WHERE tenant = $1 AND retired_at IS NULL ORDER BY
  embedding <=> $2 LIMIT 10`, with `hnsw.iterative_scan = relaxed_order` and pgvector's other defaults, as
  the superuser (readers cannot read embeddings);
- `peer`: a pipeline as users build it: the question embedded in this process by sentence-transformers
  (all-MiniLM-L6-v2, one torch thread like the backend's), `ORDER BY embedding <=> q LIMIT 5` on a table of
  its own (pgcite_bench.peer_chunk: id, tenant, title, content, embedding; HNSW and a tenant b-tree;
  iterative scan on), the answer assembled in Python (first sentences of the top 3 with [n] markers). No
  full-text or title legs, no gate, no quote verification, no audit log. Its embedding in the client is timed
  apart too (`peer embed`), so the report splits both p50s into embedding and the rest.

Recall@10 against the exact top 10: the vector leg of rag.retrieve/rag.ask (vec_rank <= 10 of rag.explain(q,
tenant, 10), the same 40-deep leg), the floor and the peer. The peer embeds the raw question, the others the
typo-corrected one (as rag.ask does), so the peer's recall also counts the rare corrected question.

Then pgbench: CLIENTS (8) clients, a custom script calling rag.ask with a random question of
pgcite_bench.question (embedded in the database), for WARMUP (45) + DURATION (60) seconds: the first
transaction of each client loads the model in its backend (~3.5 s of CPU each, all at once), so throughput,
failures and latency percentiles are those of the last DURATION seconds of pgbench's per-transaction log (the
window starts after every client's first transaction); pgbench's own totals (tps, failed transactions,
aborted clients) are printed too.

PEER_TABLE=chunk: the peer reads rag.chunk (as the superuser) instead of a copy with its own HNSW index.
Before timing, every tenant with at least TENANT_INDEX_MIN (5000; 0: none) live chunks gets its partial HNSW
and GIN indexes (rag._index_tenants; build time and size printed), which the vector and full-text legs use.

Environment: SIZE (100000), DURATION (60), WARMUP (45), QUESTIONS per class (100), CLIENTS (8), SEED (1),
BENCH_DB (pgcite_bench), DATABASE_URL (else the embedded cluster, as the other benchmarks), TORCH_THREADS
(unset: the database's setting torch_threads, default 1, and one torch thread for the peer; N: both use N for
the run, the setting restored after it). The role
pgcite_bench_reader must be able to log in (trust on the embedded cluster). Results also go to
bench/out/scale-<SIZE>.json.
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
import questions  # noqa: E402

METHODS = ["retrieve", "ask", "ask+qemb", "embed", "floor", "peer"]


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


def quantiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    v = sorted(values)
    q = statistics.quantiles(v, n=100, method="inclusive") if len(v) > 1 else [v[0]] * 99
    return {"n": len(v), "p50": round(q[49], 1), "p95": round(q[94], 1), "p99": round(q[98], 1)}


# ---------------------------------------------------------------------------------------------- the peer
def ensure_peer(dbname: str, table: str = "own") -> dict:
    """The peer's own table, copied from the corpus once, with the indexes a pgvector user would add.

    table "chunk": no table of its own, the peer reads rag.chunk (its HNSW index and tenant b-tree) as the
    superuser: the same query on the same kind of index, without a second HNSW build of the whole corpus."""
    if table == "chunk":
        return {"table": "rag.chunk", "copy_s": 0, "hnsw_build_s": 0, "hnsw_mb": 0}
    with corpus.connect(dbname) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS pgcite_bench.peer_build (corpus text, stats jsonb)")
        tag = questions.current_corpus(conn)
        row = conn.execute("SELECT stats FROM pgcite_bench.peer_build WHERE corpus = %s", (tag,)).fetchone()
        if row:
            return row[0]
        corpus.log("building the peer's table pgcite_bench.peer_chunk")
        conn.execute("DROP TABLE IF EXISTS pgcite_bench.peer_chunk")
        t0 = time.perf_counter()
        conn.execute(
            "CREATE TABLE pgcite_bench.peer_chunk AS "
            "SELECT chunk_id AS id, tenant, title, content, embedding FROM rag.chunk WHERE retired_at IS NULL"
        )
        conn.execute("ALTER TABLE pgcite_bench.peer_chunk ADD PRIMARY KEY (id)")
        conn.execute("CREATE INDEX peer_chunk_tenant_idx ON pgcite_bench.peer_chunk (tenant)")
        copy_s = time.perf_counter() - t0
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        t0 = time.perf_counter()
        conn.execute(
            "CREATE INDEX peer_chunk_embedding_idx ON pgcite_bench.peer_chunk "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        hnsw_s = time.perf_counter() - t0
        conn.execute("VACUUM (ANALYZE) pgcite_bench.peer_chunk")
        conn.execute(f"GRANT SELECT ON pgcite_bench.peer_chunk TO {corpus.READER}")
        size = conn.execute("SELECT pg_relation_size('pgcite_bench.peer_chunk_embedding_idx')").fetchone()[0]
        stats = {
            "copy_s": round(copy_s, 1),
            "hnsw_build_s": round(hnsw_s, 1),
            "hnsw_mb": round(size / 2**20, 1),
        }
        conn.execute("INSERT INTO pgcite_bench.peer_build VALUES (%s, %s)", (tag, json.dumps(stats)))
        return stats


class Peer:
    """What a user writes around pgvector: embed in the client, nearest neighbours, assemble the answer."""

    def __init__(self, conn: psycopg.Connection, table: str = "own", threads: int = 1):
        from pgvector.psycopg import register_vector

        self.model = corpus.load_model(threads)
        self.conn = conn
        register_vector(conn)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        self.sql = (
            "SELECT chunk_id, title, content FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL "
            "ORDER BY embedding <=> %s LIMIT %s"
            if table == "chunk"
            else "SELECT id, title, content FROM pgcite_bench.peer_chunk WHERE tenant = %s "
            "ORDER BY embedding <=> %s LIMIT %s"
        )

    def answer(self, question: str, tenant: str, k: int = 5) -> tuple[str, list[dict]]:
        t = time.perf_counter()
        qv = self.model.encode([question], convert_to_numpy=True, show_progress_bar=False)[0]
        self.embed_ms = (time.perf_counter() - t) * 1000
        rows = self.conn.execute(self.sql, (tenant, qv, k)).fetchall()
        parts, cites = [], []
        for n, (cid, title, content) in enumerate(rows[:3], start=1):
            first = " ".join(re.split(r"(?<=[.!?])\s+", content.strip())[:2])
            parts.append(f"{first} [{n}]")
            cites.append({"n": n, "chunk_id": cid, "title": title})
        return " ".join(parts), [{"chunk_id": r[0]} for r in rows]


# ---------------------------------------------------------------------------------------------- latency
def run_latency(dbname: str, seed: int, peer_table: str = "own", threads: int = 1) -> dict:
    reader_dsn = psycopg.conninfo.make_conninfo(corpus.db_dsn(dbname), user=corpus.READER)
    peer_dsn = corpus.db_dsn(dbname) if peer_table == "chunk" else reader_dsn
    with (
        psycopg.connect(reader_dsn, autocommit=True) as rc,
        psycopg.connect(peer_dsn, autocommit=True) as pc,
        corpus.connect(dbname) as ac,
    ):
        qs = ac.execute(
            "SELECT id, class, tenant, kind, question, qemb::text, gt_ids "
            "FROM pgcite_bench.question ORDER BY id"
        ).fetchall()
        ac.execute("SET hnsw.iterative_scan = relaxed_order")
        peer = Peer(pc, peer_table, threads)

        def timed(fn):
            t = time.perf_counter()
            out = fn()
            return (time.perf_counter() - t) * 1000, out

        calls = {
            "retrieve": lambda q, t, e: rc.execute(
                "SELECT chunk_id FROM rag.retrieve(%s, %s, 8, %s::vector)", (q, t, e)
            ).fetchall(),
            "ask": lambda q, t, e: rc.execute("SELECT status FROM rag.ask(%s, %s, 5)", (q, t)).fetchone()[0],
            "ask+qemb": lambda q, t, e: rc.execute(
                "SELECT status FROM rag.ask(%s, %s, 5, %s::vector)", (q, t, e)
            ).fetchone()[0],
            # the question's embedding alone, in the database (what rag.ask adds to ask+qemb)
            "embed": lambda q, t, e: rc.execute("SELECT rag.embed(%s)::text", (q,)).fetchone()[0],
            "floor": lambda q, t, e: [
                r[0]
                for r in ac.execute(
                    "SELECT chunk_id FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL "
                    "ORDER BY embedding <=> %s::vector LIMIT 10",
                    (t, e),
                )
            ],
            "peer": lambda q, t, e: peer.answer(q, t),
        }
        corpus.log("warming up (model in the backend and in this process, caches)")
        for _, _, t, _, q, e, _ in qs[:: max(1, len(qs) // 6)]:
            for m in METHODS:
                calls[m](q, t, e)
        rnd = random.Random(seed)
        lat: dict = {}
        recall: dict = {}
        statuses: dict = {}
        t_start = time.perf_counter()
        for i, (_, cls, t, _, q, e, gt) in enumerate(qs, start=1):
            order = METHODS[:]
            rnd.shuffle(order)
            for m in order:
                ms, out = timed(lambda m=m, q=q, t=t, e=e: calls[m](q, t, e))
                lat.setdefault(cls, {}).setdefault(m, []).append(ms)
                rec = recall.setdefault(cls, {})
                if m == "floor":
                    rec.setdefault("floor", []).append(len(set(out) & set(gt)) / len(gt))
                elif m == "peer":
                    lat[cls].setdefault("peer embed", []).append(peer.embed_ms)
                    got = {c["chunk_id"] for c in out[1]}
                    rec.setdefault("peer@5", []).append(len(got & set(gt[:5])) / min(5, len(gt)))
                elif m.startswith("ask"):
                    st = statuses.setdefault(cls, {})
                    st[out] = st.get(out, 0) + 1
            vec = [
                r[0]
                for r in rc.execute(
                    "SELECT chunk_id FROM rag.explain(%s, %s, 10) WHERE vec_rank <= 10 ORDER BY vec_rank",
                    (q, t),
                )
            ]
            recall[cls].setdefault("vector leg", []).append(len(set(vec) & set(gt)) / len(gt))
            if i % 50 == 0:
                corpus.log(f"{i}/{len(qs)} questions ({time.perf_counter() - t_start:.0f} s)")
    return {
        "latency_ms": {c: {m: quantiles(v) for m, v in ms.items()} for c, ms in lat.items()},
        "recall@10": {c: {k: round(statistics.mean(v), 4) for k, v in r.items()} for c, r in recall.items()},
        "ask_statuses": statuses,
        "questions_per_class": {c: len(v["retrieve"]) for c, v in lat.items()},
    }


# ---------------------------------------------------------------------------------------------- pgbench
PGBENCH_SCRIPT = """\\set id random(1, {n})
SELECT a.status FROM pgcite_bench.question AS q CROSS JOIN LATERAL rag.ask(q.question, q.tenant, 5) AS a
WHERE q.id = :id;
"""


def run_pgbench(dbname: str, clients: int, duration: int, warmup: int) -> dict:
    from pgcite.cluster import pg_bindir

    with corpus.connect(dbname) as conn:
        n = conn.execute("SELECT count(*) FROM pgcite_bench.question").fetchone()[0]
    info = psycopg.conninfo.conninfo_to_dict(corpus.db_dsn(dbname))
    with tempfile.TemporaryDirectory(prefix="pgcite-pgbench-") as tmp:
        script = Path(tmp) / "ask.sql"
        script.write_text(PGBENCH_SCRIPT.format(n=n))
        cmd = [
            str(pg_bindir() / "pgbench"),
            "-n",
            "-f",
            str(script),
            "-c",
            str(clients),
            "-j",
            str(min(clients, os.cpu_count() or 1)),
            "-T",
            str(warmup + duration),
            "-l",
            "--log-prefix",
            str(Path(tmp) / "txn"),
            "-h",
            str(info.get("host", "127.0.0.1")),
            "-p",
            str(info.get("port", "5432")),
            "-U",
            corpus.READER,
            dbname,
        ]
        corpus.log(
            f"pgbench: {clients} clients, {warmup} s warm-up + {duration} s, "
            f"rag.ask of a random question of {n}"
        )
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        rows = []  # (client, transaction, latency µs or 'failed'/'skipped', end time)
        for f in Path(tmp).glob("txn*"):
            for line in f.read_text().splitlines():
                p = line.split()
                rows.append((int(p[0]), int(p[1]), p[2], int(p[4]) + int(p[5]) / 1e6))
    out = res.stdout
    figures: dict = {
        "clients": clients,
        "warmup_s": warmup,
        "duration_s": duration,
        "exit_code": res.returncode,
        "aborted_clients": len(re.findall(r"client \d+ aborted", res.stderr + out)),
    }
    for key, pattern in {
        "transactions": r"number of transactions actually processed: (\d+)",
        "failed": r"number of failed transactions: (\d+)",
        "tps": r"tps = ([\d.]+)",
    }.items():
        m = re.search(pattern, out)
        figures[key] = float(m.group(1)) if m else None
    # The first transaction of a client loads the model in its backend; the window is the last `duration`
    # seconds, and starts no earlier than the end of the last client's first transaction.
    firsts: dict[int, float] = {}
    for c, _, _, end in sorted(rows, key=lambda r: r[3]):
        firsts.setdefault(c, end)
    last = max((r[3] for r in rows), default=0.0)
    start = max([last - duration, *firsts.values()]) if rows else 0.0
    window = [r for r in rows if r[3] > start]
    ok = [r for r in window if r[2] not in ("failed", "skipped")]
    figures["first_txn_ms"] = quantiles(
        [int(r[2]) / 1000 for r in rows if r[3] == firsts[r[0]] and r[2].isdigit()]
    )
    figures["window_s"] = round(last - start, 1)
    figures["window_transactions"] = len(ok)
    figures["window_failed"] = len(window) - len(ok)
    figures["window_tps"] = round(len(ok) / (last - start), 3) if last > start else None
    figures["window_latency_ms"] = quantiles([int(r[2]) / 1000 for r in ok])
    if res.returncode != 0 or figures["aborted_clients"]:
        figures["stderr"] = res.stderr[-2000:]
    return figures


def setting_as_set(dbname: str, name: str) -> str | None:
    """A database setting of pgcite as set (NULL when it is the default)."""
    with corpus.connect(dbname) as conn:
        return conn.execute(
            "SELECT CASE WHEN source = 'default' THEN NULL ELSE value END FROM rag.settings WHERE name = %s",
            (name,),
        ).fetchone()[0]


def set_setting(dbname: str, name: str, value: str | None) -> None:
    """rag.set_config(name, value) as the superuser; NULL: the default again. The backend settings
    (torch_threads, background_embedding) are read by a backend once: new connections follow."""
    with corpus.connect(dbname) as conn:
        conn.execute("SELECT rag.set_config(%s, %s)", (name, value))


def torch_threads_set(dbname: str) -> str | None:
    """The database's setting torch_threads as set (NULL when it is the default)."""
    return setting_as_set(dbname, "torch_threads")


def set_torch_threads(dbname: str, value: str | None) -> None:
    """The backends' embedding threads (an admin setting a backend reads when it loads the model); NULL: the
    default again."""
    set_setting(dbname, "torch_threads", value)


# ---------------------------------------------------------------------------------------------- report
def ratio(a: dict, b: dict, key: str) -> str:
    if not a.get(key) or not b.get(key):
        return "-"
    return f"{a[key] / b[key]:.2f}"


def report(result: dict) -> str:
    lines = []
    c = result["corpus"]
    lines.append(
        f"corpus: {c['chunks']} chunks, {c['documents']} documents, {c.get('sentences')} sentences, "
        f"{c['tenants']} tenants; load {c.get('load_chunks_s')} s (chunks+sentences), "
        f"HNSW build {c.get('hnsw_build_s')} s, total {c.get('total_s')} s"
    )
    sz = c.get("sizes_mb", {})
    big = sorted(((v, k) for k, v in sz.items() if v >= 1 and k != "database"), reverse=True)
    lines.append("sizes (MB): " + ", ".join(f"{k.removeprefix('rag.')} {v}" for v, k in big))
    lines.append(
        f"  database {sz.get('database')} MB; index builds (s): {json.dumps(c.get('index_build_s'))}"
    )
    p = result["peer_table"]
    lines.append(
        f"peer table: copy {p['copy_s']} s, HNSW build {p['hnsw_build_s']} s, HNSW {p['hnsw_mb']} MB"
    )
    ti = result.get("tenant_indexes") or []
    tenants = {t["tenant"]: t["live_chunks"] for t in ti}
    if ti:
        lines.append(
            f"partial indexes (rag._index_tenants, TENANT_INDEX_MIN {result.get('tenant_index_min')}): "
            f"{len(ti)} indexes of {len(tenants)} tenants, {sum(tenants.values())} chunks, "
            f"build {round(sum(t['build_s'] for t in ti), 1)} s, "
            f"{round(sum(t['size_mb'] for t in ti), 1)} MB; "
            + ", ".join(
                f"{t['tenant']} {t['live_chunks']}: {t['build_s']} s {t['size_mb']} MB" for t in ti[:6]
            )
        )
    lines.append(
        "embedding threads (torch_threads in the database, torch in the peer): "
        f"{result.get('torch_threads', 1)}"
    )
    lines.append("")
    lines.append(f"{'class':<8} {'call':<9} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    lat = result["latency"]["latency_ms"]
    for cls, ms in lat.items():
        for m in [*METHODS, "peer embed"]:
            if m not in ms:
                continue
            q = ms[m]
            lines.append(f"{cls:<8} {m:<9} {q['n']:>4} {q['p50']:>8} {q['p95']:>8} {q['p99']:>8}")
    lines.append("")
    lines.append(
        f"{'class':<8} {'recall@10 vector leg':>21} {'floor':>7} {'peer@5':>7}   "
        f"{'retrieve/floor p50 p95':>23} {'ask/peer p50 p95':>17} {'ask+qemb/floor p50':>19}"
    )
    for cls, ms in lat.items():
        r = result["latency"]["recall@10"][cls]
        lines.append(
            f"{cls:<8} {r['vector leg']:>21} {r['floor']:>7} {r['peer@5']:>7}   "
            f"{ratio(ms['retrieve'], ms['floor'], 'p50'):>18} {ratio(ms['retrieve'], ms['floor'], 'p95'):>4} "
            f"{ratio(ms['ask'], ms['peer'], 'p50'):>12} {ratio(ms['ask'], ms['peer'], 'p95'):>4} "
            f"{ratio(ms['ask+qemb'], ms['floor'], 'p50'):>19}"
        )
    lines.append(f"rag.ask statuses (both ask calls): {json.dumps(result['latency']['ask_statuses'])}")
    lines.append("")
    lines.append(
        "where the p50s go: rag.ask = the rest (ask+qemb) + what its question's embedding adds to it (ask - "
        "ask+qemb: less than embed, rag.embed alone, where it runs on the backend's worker thread while the "
        "full-text and title legs run); the peer = its embedding in the client (sentence-transformers) + "
        "the rest"
    )
    for cls, ms in lat.items():
        if "peer embed" not in ms or "embed" not in ms:
            continue
        pe, pr = ms["peer embed"]["p50"], ms["peer"]["p50"]
        added = round(ms["ask"]["p50"] - ms["ask+qemb"]["p50"], 2)
        lines.append(
            f"{cls:<8} ask {ms['ask']['p50']} = rest {ms['ask+qemb']['p50']} + {added} (embed alone "
            f"{ms['embed']['p50']}); "
            f"peer {pr} = embed {pe} + rest {round(pr - pe, 2)}; "
            f"embedding in the database / in the peer {ratio(ms['embed'], ms['peer embed'], 'p50')}, "
            f"rest ask+qemb / peer's rest {round(ms['ask+qemb']['p50'] / max(pr - pe, 0.01), 1)}"
        )
    b = result["pgbench"]
    if b:
        q = b["window_latency_ms"]
        lines.append("")
        lines.append(
            f"pgbench rag.ask (question embedded in the database), {b['clients']} clients, "
            f"last {b['window_s']} s "
            f"of {b['warmup_s']} + {b['duration_s']} s: {b['window_tps']} tps, {b['window_transactions']} "
            f"transactions, {b['window_failed']} failed; p50 {q.get('p50')} ms, p95 {q.get('p95')} ms, "
            f"p99 {q.get('p99')} ms"
        )
        lines.append(
            f"  whole run (pgbench): tps {b['tps']}, {b['transactions']} transactions, failed {b['failed']}, "
            f"aborted clients {b['aborted_clients']}, exit {b['exit_code']}; first transaction of a client "
            f"(loads the model) p50 {b['first_txn_ms'].get('p50')} ms"
        )
    return "\n".join(lines)


def main() -> None:
    size = env_int("SIZE", 100000)
    seed = env_int("SEED", 1)
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    duration = env_int("DURATION", 60)
    warmup = env_int("WARMUP", 45)
    clients = env_int("CLIENTS", 8)
    per_class = env_int("QUESTIONS", 100)
    result: dict = {"size": size, "seed": seed, "db": dbname}
    result["tenant_index_min"] = env_int("TENANT_INDEX_MIN", 5000)
    result["corpus"] = corpus.ensure(size, seed, dbname)
    result["questions"] = questions.ensure(dbname, per_class, seed)
    peer_table = os.environ.get("PEER_TABLE") or "own"
    result["peer_table"] = ensure_peer(dbname, peer_table)
    result["tenant_indexes"] = corpus.ensure_tenant_indexes(dbname, env_int("TENANT_INDEX_MIN", 5000))
    out = corpus.OUT / f"scale-{size}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    threads = env_int("TORCH_THREADS", 0)
    result["torch_threads"] = threads or 1
    before = torch_threads_set(dbname)
    if threads:
        # the backends' embedding threads and the peer's, for this run only
        set_torch_threads(dbname, str(threads))
    try:
        result["latency"] = run_latency(dbname, seed, peer_table, threads or 1)
        out.write_text(json.dumps(result, indent=2))  # kept if pgbench fails
        result["pgbench"] = run_pgbench(dbname, clients, duration, warmup) if duration > 0 else None
    finally:
        if threads:
            set_torch_threads(dbname, before)
    out.write_text(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
