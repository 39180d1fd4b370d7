"""rag.verify on nested markers before and after security round 10 (0.8.0), side by side in one run: the body
of sql/core/060-verify.sql at git revision --old (created as pg_temp.verify_old) and the installed rag.verify,
on answers "[3] " + "[1" * d + "]" * d (d 1,000, 2,000, 4,000: each removal of [1] forms another) and on a
flat answer of 16,000 markers ("s{i} [{i % 50}]").

    .venv/bin/python bench/verify_nested.py --dsn 'host=... port=... dbname=... user=postgres' [--repeat 3]

--old REV: the revision of the old body (default c644fe3~1). A superuser's connection (pg_temp); the
database needs a tenant 'alpha' with a chunk holding "alpha team vacuums" (the attack tests' two-tenant
database). Old and new alternate (old, new, new, old, ...), `--repeat` times each; printed: the median seconds
of each, the ratio, whether both gave the same answer.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--old", default="c644fe3~1")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    body = subprocess.run(
        ["git", "show", f"{a.old}:sql/core/060-verify.sql"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    body = body[
        body.index("CREATE OR REPLACE FUNCTION rag.verify(") : body.index("COMMENT ON FUNCTION rag.verify(")
    ]
    body = re.sub(r"\bverify\.", "verify_old.", body.replace("rag.verify(", "pg_temp.verify_old("))
    with psycopg.connect(a.dsn, autocommit=True) as c:
        c.execute(body)
        cid = c.execute(
            "SELECT chunk_id FROM rag.chunk WHERE content LIKE '%alpha team vacuums%' LIMIT 1"
        ).fetchone()[0]
        cited = json.dumps([{"n": n, "chunk_id": cid, "quote": "alpha team vacuums"} for n in (3, 10, 0)])
        cases = [(f"nested {d}", "[3] " + "[1" * d + "]" * d) for d in (1000, 2000, 4000)]
        cases.append(("flat 16000", " ".join(f"s{i} [{i % 50}]" for i in range(16000))))
        for name, text in cases:
            secs: dict[str, list[float]] = {"pg_temp.verify_old": [], "rag.verify": []}
            got = {}
            for i in range(a.repeat):  # old, new, new, old, ...
                for fn in sorted(secs, reverse=i % 2 == 1):
                    t = time.monotonic()
                    got[fn] = c.execute(f"SELECT * FROM {fn}(%s, %s, %s)", (text, cited, [cid])).fetchone()
                    secs[fn].append(time.monotonic() - t)
            to, tn = (statistics.median(v) for v in secs.values())
            same = got["pg_temp.verify_old"] == got["rag.verify"]
            print(f"{name:12} old {to:7.3f} s  new {tn:7.3f} s  old/new {to / tn:6.1f}  same {same}")


if __name__ == "__main__":
    main()
