"""Shared helpers of the benchmarks: connect to the embedded cluster (or DATABASE_URL) and time things."""

from __future__ import annotations

import os
import statistics
import time
from contextlib import contextmanager

import psycopg

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
