"""What session 24's indexes cost a write: rag.store_document of 200-chunk documents with given embeddings,
with the retrieval indexes of migrations 019 and 020 (chunk_title_order_idx, chunk_title_long_key_idx,
chunk_tsv_tenant_newest_idx) against the one they replaced (chunk_title_idx), alternated in one run, in a
scratch database (s24ing, dropped afterwards) of the server DATABASE_URL names.

    DATABASE_URL="host=... user=postgres dbname=postgres" .venv/bin/python bench/store_indexes.py
"""

import json
import os
import random
import statistics
import time

import psycopg

url = os.environ.get("DATABASE_URL", "dbname=postgres")
admin = psycopg.connect(url, autocommit=True)
admin.execute("DROP DATABASE IF EXISTS s24ing")
admin.execute("CREATE DATABASE s24ing")
c = psycopg.connect(psycopg.conninfo.make_conninfo(url, dbname="s24ing"), autocommit=True)
c.execute("CREATE EXTENSION pgcite CASCADE")
c.execute("SELECT rag.create_tenant('t')")
rnd = random.Random(1)
words = "vacuum index table checkpoint replication parameters description examples notes query plan".split()


def items(n):
    out = []
    for i in range(n):
        v = [rnd.gauss(0, 1) for _ in range(384)]
        out.append(
            {
                "title": rnd.choice(["Parameters", "Description", "Examples", f"Section {i % 50}"]),
                "content": " ".join(rnd.choice(words) for _ in range(80)),
                "embedding": v,
            }
        )
    return json.dumps(out)


docs = [items(200) for _ in range(6)]
NAMES = ("chunk_title_order_idx", "chunk_title_long_key_idx", "chunk_tsv_tenant_newest_idx")
defs = dict(
    c.execute(
        "SELECT 'rag.' || x.relname, pg_get_indexdef(x.oid) FROM pg_class AS x "
        "WHERE x.relnamespace = 'rag'::regnamespace AND x.relname = ANY(%s)",
        (list(NAMES),),
    ).fetchall()
)
assert len(defs) == len(NAMES), defs


def state(new: bool) -> None:
    if new:
        c.execute("DROP INDEX IF EXISTS rag.chunk_title_idx")
        for d in defs.values():
            c.execute(d.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS"))
    else:
        for name in defs:
            c.execute(f"DROP INDEX IF EXISTS {name}")
        c.execute(
            "CREATE INDEX IF NOT EXISTS chunk_title_idx ON rag.chunk (tenant, title) WHERE retired_at IS NULL"
        )


ms: dict[bool, list[float]] = {True: [], False: []}
n = 0
for rnd_ in range(6):
    for new in (True, False) if rnd_ % 2 else (False, True):
        state(new)
        for d in docs:
            n += 1
            t0 = time.perf_counter()
            c.execute("SELECT * FROM rag.store_document('t', %s, %s::jsonb)", (f"d{n}.md", d)).fetchall()
            ms[new].append((time.perf_counter() - t0) * 1000)
for new in (False, True):
    v = ms[new]
    print(
        ("session 24 indexes" if new else "session start's   "),
        f"store_document of 200 chunks: p50 {statistics.median(v):.1f} ms, "
        f"mean {statistics.mean(v):.1f} ms ({len(v)} calls)",
    )
c.close()
admin.execute("DROP DATABASE s24ing")
