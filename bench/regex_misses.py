"""Which regular expressions one backend compiles per rag.ask. PostgreSQL keeps 32 compiled patterns per
backend (src/backend/utils/adt/regexp.c, MAX_CACHED_RES, least recently used out), so a pattern whose next use
comes after 32 other distinct patterns is compiled again (issue #10, session 15). Reads `perf script`
output of uprobes on the server binary (root, a private cluster; the probes cost microseconds per regular
expression while recorded):

    B=$(pg_config --bindir)/postgres
    perf probe -x $B --add 'rcc=RE_compile_and_cache hdr=+0(%di):u32 pat=+4(%di):string flags=%si:s32'
    perf probe -x $B --add 'rcomp=pg_regcomp' && perf probe -x $B --add 'rcompr=pg_regcomp%return'
    perf record -e 'probe_postgres:*' -a -o /tmp/rx.data -- .venv/bin/python bench/ask_statements.py \
        --dsn '...dbname=pgcite_quotes' --reader READER --tenant pgdocs
    perf script -i /tmp/rx.data > /tmp/rx.txt
    .venv/bin/python bench/regex_misses.py /tmp/rx.txt --asks 229 [--top 40]

(--asks: the asks of that run, warm-up included: ask_statements.py's count + 3.) The backend with the most
events is read. Prints the distinct patterns, regular-expression calls, compilations (cache misses) and
compile time (pg_regcomp, entry to return) per ask, then per pattern: compile ms per ask, misses per ask,
calls per ask, the cflags (3 advanced, +8 case-insensitive, +16 no subexpressions) and the pattern's start.
"""

from __future__ import annotations

import argparse
import collections
import re


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="perf script output")
    ap.add_argument("--asks", type=int, required=True)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    text = open(args.trace, encoding="latin1").read()  # noqa: SIM115 - read once
    # one record per event; a pattern may hold newlines
    records = re.split(r"\n(?=\s*\S+\s+\d+ \[\d+\])", text)
    pids = collections.Counter(r.split()[1] for r in records if "probe_postgres" in r and len(r.split()) > 1)
    pid = pids.most_common(1)[0][0]
    calls: collections.Counter = collections.Counter()
    misses: collections.Counter = collections.Counter()
    compile_s: collections.defaultdict = collections.defaultdict(float)
    last = None
    start = None
    for r in records:
        f = r.split()
        if len(f) < 4 or f[1] != pid:
            continue
        ts = float(f[3].rstrip(":"))
        if "probe_postgres:rcc:" in r:
            m = re.search(r'hdr=(\d+) pat="(.*)" flags=(-?\d+)$', r, re.S)
            if not m:
                continue
            hdr = int(m.group(1))
            # a 4-byte varlena header (little endian): length << 2, the pattern's bytes follow it
            pat = m.group(2)[: (hdr >> 2) - 4] if hdr & 3 == 0 else m.group(2)
            last = (pat, int(m.group(3)))
            calls[last] += 1
        elif "rcompr__return" in r:
            if start is not None:
                compile_s[last] += ts - start
                start = None
        elif "probe_postgres:rcomp:" in r:
            start = ts
            misses[last] += 1
    n = args.asks
    print(
        f"backend {pid}: {len(calls)} distinct patterns; per ask {sum(calls.values()) / n:.1f} calls, "
        f"{sum(misses.values()) / n:.1f} compilations, {sum(compile_s.values()) * 1000 / n:.2f} ms compiling"
    )
    print("| compile ms / ask | misses / ask | calls / ask | cflags | pattern |")
    print("|---|---|---|---|---|")
    for key, t in sorted(compile_s.items(), key=lambda kv: -kv[1])[: args.top]:
        shown = key[0][:100].replace("\n", "\\n").replace("|", "\\|")
        print(f"| {t * 1000 / n:.3f} | {misses[key] / n:.2f} | {calls[key] / n:.1f} | {key[1]} | `{shown}` |")


if __name__ == "__main__":
    main()
