"""Shared helpers of the benchmarks: connect to the embedded cluster (or DATABASE_URL) and time things."""

from __future__ import annotations

import os
import statistics
import time
from contextlib import contextmanager

import psycopg
from psycopg import sql

from pgcite.cluster import Cluster, default_home


def dsn() -> str:
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    cluster = Cluster(default_home())
    cluster.init()
    cluster.start()
    cluster.ensure_database()
    return cluster.dsn()


def connect(**kw) -> psycopg.Connection:
    return psycopg.connect(dsn(), autocommit=True, **kw)


@contextmanager
def timer():
    box = {}
    t0 = time.perf_counter()
    yield box
    box["s"] = time.perf_counter() - t0


def percentiles(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    q = statistics.quantiles(v, n=100, method="inclusive")
    return {"p50": q[49], "p95": q[94], "max": v[-1], "n": len(v)}


def ann_search(conn: psycopg.Connection, tenant: str, qemb: str, limit: int) -> tuple[list[int], float]:
    """The bare HNSW query of one tenant's live chunks under the session's hnsw.* settings: (ids, ms)."""
    t0 = time.perf_counter()
    ids = conn.execute(
        sql.SQL(
            "SELECT array_agg(a.chunk_id) FROM (SELECT c.chunk_id FROM rag.chunk AS c "
            "WHERE c.tenant = {} AND c.retired_at IS NULL "
            "ORDER BY c.embedding OPERATOR(public.<=>) %s::vector LIMIT %s) AS a"
        ).format(sql.Literal(tenant)),
        (qemb, limit),
    ).fetchone()[0]
    return ids or [], (time.perf_counter() - t0) * 1000


def exact_top10(conn: psycopg.Connection, ids: list[int], qemb: str) -> list[tuple[int, float]]:
    """The best 10 of `ids` by exact distance, ordered as the vector leg orders them (rounded to 6 places,
    then doc_key, chunk_index, chunk_id): (chunk_id, rounded distance)."""
    return conn.execute(
        "SELECT chunk_id, round((embedding OPERATOR(public.<=>) %s::vector)::numeric, 6)::float8 "
        "FROM rag.chunk WHERE chunk_id = ANY (%s) "
        "ORDER BY 2, doc_key, chunk_index, chunk_id LIMIT 10",
        (qemb, ids or []),
    ).fetchall()
