"""PostgreSQL's shared memory on huge pages or not (the server's huge_pages), side by side: retrieval at 1M.

    # as root, on a private cluster whose configuration includes CONF (e.g. the cluster of bench_scale.py):
    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/server_huge_pages.py \\
        --pgdata /var/tmp/pgb1m/data --conf /var/tmp/pgb1m/data/postgresql.pgcite.conf [--order off,on,on,off]

A DBA's setting, not pgcite's: with `huge_pages = on` the server maps shared_buffers on 2 MB pages (the kernel
must have them reserved first: `sysctl vm.nr_hugepages=N`, N at least the server's
shared_memory_size_in_huge_pages, which this script reads and reserves). For each value of --order in turn:
huge_pages set in CONF, the server restarted (pg_ctl as the postgres OS user: shared buffers start empty each
time), then every question of pgcite_bench.question asked three times over as the reader (the first round
warms the buffers up and is not counted): rag.retrieve (k 8) and rag.ask (k 5) with the question's embedding
passed. Prints p50 / p95 per class and call for each run, and the mean of the p50s per value. CONF is left
with the last value of --order.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

CALLS = {
    "retrieve": "SELECT chunk_id FROM rag.retrieve(%s, %s, 8, %s::vector)",
    "ask+qemb": "SELECT status FROM rag.ask(%s, %s, 5, %s::vector)",
}


def set_huge_pages(conf: str, value: str) -> None:
    text = Path(conf).read_text()
    text = re.sub(r"(?m)^huge_pages\s*=.*\n?", "", text)
    Path(conf).write_text(text.rstrip("\n") + f"\nhuge_pages = {value}\n")


def restart(pgdata: str) -> None:
    log = os.path.join(os.path.dirname(pgdata.rstrip("/")), "postgresql.log")
    subprocess.run(
        ["su", "postgres", "-c", f"pg_ctl -D {pgdata} -l {log} -w -m fast restart"],
        check=True,
        capture_output=True,
    )


def reserve(dbname: str) -> None:
    with corpus.connect(dbname) as c:
        need = int(c.execute("SHOW shared_memory_size_in_huge_pages").fetchone()[0])
    have = int(Path("/proc/sys/vm/nr_hugepages").read_text())
    if have < need + 16:
        Path("/proc/sys/vm/nr_hugepages").write_text(str(need + 16))


def run(dbname: str) -> dict[tuple[str, str], list[float]]:
    with corpus.connect(dbname) as ac:
        qs = ac.execute(
            "SELECT class, tenant, question, qemb::text FROM pgcite_bench.question ORDER BY id"
        ).fetchall()
    dsn = psycopg.conninfo.make_conninfo(corpus.db_dsn(dbname), user=corpus.READER)
    lat: dict[tuple[str, str], list[float]] = {}
    with psycopg.connect(dsn, autocommit=True) as rc:
        for r in range(3):
            for cls, tenant, q, e in qs:
                for call, sql in CALLS.items():
                    t0 = time.perf_counter()
                    rc.execute(sql, (q, tenant, e)).fetchall()
                    if r:
                        lat.setdefault((cls, call), []).append((time.perf_counter() - t0) * 1000)
    return lat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pgdata", required=True)
    ap.add_argument("--conf", required=True, help="a file the server's configuration includes")
    ap.add_argument("--order", default="off,on,on,off")
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    reserve(dbname)
    p50s: dict[tuple[str, str, str], list[float]] = {}
    print("| run | huge_pages | class | call | p50 / p95 ms |")
    print("|---|---|---|---|---|")
    for n, value in enumerate(v.strip() for v in args.order.split(",")):
        set_huge_pages(args.conf, value)
        restart(args.pgdata)
        with corpus.connect(dbname) as c:
            shown = c.execute("SHOW huge_pages").fetchone()[0]
        for (cls, call), ms in sorted(run(dbname).items()):
            ms.sort()
            p50 = statistics.median(ms)
            p50s.setdefault((value, cls, call), []).append(p50)
            print(f"| {n + 1} | {shown} | {cls} | {call} | {p50:.2f} / {ms[int(len(ms) * 0.95)]:.2f} |")
    print()
    for (value, cls, call), v in sorted(p50s.items(), key=lambda x: (x[0][1], x[0][2], x[0][0])):
        print(f"huge_pages {value}: {cls} {call} mean p50 {statistics.mean(v):.2f} ms ({len(v)} runs)")


if __name__ == "__main__":
    main()
