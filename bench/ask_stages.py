"""Where a rag.ask's time goes, statement by statement, on the dev set (issue #10, round 6).

    DATABASE_URL='host=... port=... user=postgres dbname=pgcite_quotes' \\
        .venv/bin/python bench/ask_stages.py \\
        [--reader h10b_reader] [--tenant pgdocs] [--qemb] [--embed-dsn DSN] [--rounds 2] [--sql-dir sql/core]

Needs a superuser connection (it creates session-only probe copies in pg_temp; nothing is written to the
database but the audit rows the asks append, as rag.ask does). For each question of eval/pgdocs-dev.jsonl and
the first --offtopic questions of eval/offtopic.jsonl:

1. laps: probe copies of rag._ask, rag._prepare_question, rag._answer and rag._append_log (from the files of
   --sql-dir) as pg_temp functions, the same statements with clock_timestamp() read after each one
   (pg_temp._lap), called with the reader as caller in a transaction of their own; COMMIT is timed apart;
2. functions: the real rag._ask in a transaction with track_functions = 'all', self time per function from
   pg_stat_xact_user_functions (SQL functions that are inlined do not appear);
3. whole: rag.ask as the reader (autocommit), and rag.retrieve (k 5, the question's embedding passed).

--qemb passes the question's embedding (computed first with rag.embed on --embed-dsn, default the same
database): the core path (a database without pgcite_python needs it). Prints p50 / p95 per stage and its share
of the mean ask, over every round after the first (a warm-up), and the function table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent

LAP = """
CREATE OR REPLACE FUNCTION pg_temp._lap_start() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM set_config('pgcite_probe.laps', '', false);
    PERFORM set_config('pgcite_probe.t', clock_timestamp()::text, false);
    RETURN true;
END $$;
CREATE OR REPLACE FUNCTION pg_temp._lap(p text) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE t timestamptz := clock_timestamp();
BEGIN
    PERFORM set_config('pgcite_probe.laps', current_setting('pgcite_probe.laps') || p || '='
        || (extract(epoch FROM t - current_setting('pgcite_probe.t')::timestamptz) * 1000)::text || ';',
        false);
    PERFORM set_config('pgcite_probe.t', clock_timestamp()::text, false);
END $$;
"""


FUNCTIONS = "SELECT schemaname || '.' || funcname, calls, self_time FROM pg_stat_xact_user_functions"


def function_source(src: str, name: str) -> str:
    """The CREATE statement of rag.<name>( in a file's text, up to its COMMENT."""
    start = src.index(f"CREATE OR REPLACE FUNCTION rag.{name}(")
    return src[start : src.index(f"COMMENT ON FUNCTION rag.{name}(", start)]


def with_laps(f: str, laps: list[tuple[str, str]]) -> str:
    """f with PERFORM pg_temp._lap(label) inserted before each marker (each must occur once)."""
    for marker, label in laps:
        if f.count(marker) == 0:  # a statement this version does not have (its time goes to the next lap)
            print(f"(no stage {label!r} in this version)")
            continue
        if f.count(marker) != 1:
            raise SystemExit(f"marker for {label!r} found {f.count(marker)} times: {marker!r}")
        indent = marker[: len(marker) - len(marker.lstrip(" "))]
        f = f.replace(marker, f"{indent}PERFORM pg_temp._lap('{label}');\n{marker}", 1)
    return f


def probe_sources(sql_dir: Path) -> list[str]:
    """pg_temp._ask_probe and the probes it calls (see the module docstring)."""
    ask_src = (sql_dir / "070-ask.sql").read_text()
    answer_src = (sql_dir / "055-answer.sql").read_text()
    # rag._prepare_question: in 039-question.sql since 040-retrieve.sql was split (older versions: 040)
    question_file = sql_dir / "039-question.sql"
    question_src = (question_file if question_file.is_file() else sql_dir / "040-retrieve.sql").read_text()
    audit_src = (sql_dir / "080-audit.sql").read_text()

    prep = function_source(question_src, "_prepare_question")
    prep = with_laps(
        prep,
        [
            ("    PERFORM rag._require_tenant(tenant);", "check_question"),
            ("    IF has_question THEN", "require_tenant"),
            ("        qemb := rag._query_embedding(", "correct_question"),
            ("    END IF;\nEND", "embed_question"),
        ],
    ).replace("rag._prepare_question(", "pg_temp._prepare_probe(", 1)

    answer = function_source(answer_src, "_answer")
    answer = with_laps(
        answer,
        [
            # each lap names the statements since the one before, in the order they run (0.9.0: what reads
            # only the question before retrieval, session 18; its term weights too, session 19)
            ("    foreign_names := rag._foreign_names(", "answer_setup"),
            ("    names := ARRAY(", "foreign_names"),
            ("    defined := rag._defined_term(", "question_names"),
            ("    as_embedded := rag._embedding_text(", "defined_term"),
            (
                "    SELECT\n        coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(\n"
                "            'rank'",
                "term_weights",
            ),
            ("    n_visible := rag._live_chunks(", "candidates"),
            ("    covered := rag._coverage(", "live_chunks"),
            ("    SELECT avg((EXISTS (", "coverage"),
            ("    IF term_weights IS NULL AND NOT EXISTS (", "names_found"),
            ("    scored := rag._sentence_scores(", "lexical_term_weights"),
            ("    IF scored IS NULL THEN", "sentence_scores"),
            ("    IF best_sentence IS NOT NULL THEN\n        reach :=", "best_sentence"),
            ("    IF pg_catalog.jsonb_array_length(reach) > 0 THEN", "section_chunks"),
            ("        -- a section chunk is kept when", "reach_scores"),
            ("    -- Gate: the score is the geometric mean", "reach_filter"),
            ("    IF gate_score IS NULL OR", "gate_score"),
            ("    IF failed <> '{}' THEN", "gate_evidence"),
            ("        status := 'abstained';\n        reason := 'no_relevant_sources';", "abstain"),
            ("    -- Lower chunks: a chunk ranked below the passages", "reach_kept"),
            ("    -- A passage of the same section (document version", "lower_chunks"),
            ("    -- Verbatim quotes (rag._choose_quotes)", "siblings"),
            ("    -- the section chunks quoted join the evidence", "choose_quotes"),
            ("    SELECT\n        pg_catalog.string_agg((x.q ->> 'quote')", "quoted_reach"),
            ("    SELECT * INTO v FROM rag.verify(", "draft"),
            ("    status := v.status;", "verify"),
        ],
    ).replace("rag._answer(", "pg_temp._answer_probe(", 1)

    append = function_source(audit_src, "_append_log")
    append = with_laps(
        append,
        [
            ("    l.entry_hash := ", "log_row"),
            # 0.7.0: chained at insert when it can be (else as before: insert, then rag._seal_log)
            ("    IF NOT (pg_catalog.pg_is_in_recovery()", "log_entry_hash"),
            ("            INSERT INTO rag.ask_log", "log_head_lock"),
            ("            UPDATE rag.log_head AS x", "log_insert_chained"),
            ("            RETURN l.ask_id;", "log_head_update"),
            (
                "    INSERT INTO rag.ask_log OVERRIDING SYSTEM VALUE SELECT l.*;\n    PERFORM",
                "log_entry_hash",
            ),
            ("    PERFORM rag._seal_log(", "log_insert"),
            ("    RETURN l.ask_id;\nEND", "log_seal"),
        ],
    ).replace("rag._append_log(", "pg_temp._append_log_probe(", 1)

    ask = function_source(ask_src, "_ask")
    ask = ask.replace("DECLARE\n", "DECLARE\n    probe_started boolean := pg_temp._lap_start();\n", 1)
    ask = with_laps(
        ask,
        [
            ("    IF generator IS NOT NULL AND pg_catalog.to_regprocedure", "ask_setup"),
            ("        SELECT * INTO r FROM rag._answer(", "ask_to_answer"),
            ("        status := r.status;", "answer_return"),
            ("    t2 := pg_catalog.clock_timestamp();", "ask_generation"),
            ("    IF read_only THEN", "ask_timings"),
            ("        ask_id := rag._append_log(", "ask_logged_evidence"),
            (
                "    IF g IS NOT NULL THEN\n        evidence := evidence || "
                "pg_catalog.jsonb_build_object('generation', "
                "rag._generation_summary",
                "ask_after_log",
            ),
            ("    RETURN NEXT;\nEND", "ask_tail"),
        ],
    )
    ask = (
        ask.replace("rag._ask(", "pg_temp._ask_probe(", 1)
        .replace("rag._prepare_question(", "pg_temp._prepare_probe(")
        .replace("rag._answer(", "pg_temp._answer_probe(")
        .replace("rag._append_log(", "pg_temp._append_log_probe(")
        .replace("SECURITY DEFINER\n", "")
    )
    return [LAP, prep + ";", answer + ";", append + ";", ask + ";"]


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p))]


def load(file: str, limit: int | None = None) -> list[str]:
    rows = [json.loads(x) for x in (ROOT / "eval" / file).read_text().splitlines() if x.strip()]
    return [r["question"] for r in rows][:limit]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    ap.add_argument("--reader", default="h10b_reader")
    ap.add_argument("--tenant", default="pgdocs")
    ap.add_argument("--qemb", action="store_true", help="pass the question's embedding (the core path)")
    ap.add_argument("--embed-dsn", help="where rag.embed runs for --qemb (default: --dsn)")
    ap.add_argument("--offtopic", type=int, default=40, help="off-topic questions added to the dev set")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sql-dir", default=str(ROOT / "sql/core"))
    ap.add_argument("--label", default="")
    ap.add_argument(
        "--bench",
        type=int,
        default=0,
        help="instead of the dev set: the first N questions per class of pgcite_bench.question (the scale "
        "benchmark's database), each of its own tenant; with --qemb its stored embedding",
    )
    args = ap.parse_args()
    owner = psycopg.connect(args.dsn, autocommit=True)
    reader = psycopg.connect(psycopg.conninfo.make_conninfo(args.dsn, user=args.reader), autocommit=True)
    tenants: dict[str, str] = {}
    qembs: dict[str, str | None] = {}
    if args.bench:
        rows = owner.execute(
            "SELECT tenant, question, qemb::text FROM (SELECT *, row_number() OVER "
            "(PARTITION BY class ORDER BY id) AS n FROM pgcite_bench.question) AS q WHERE n <= %s "
            "ORDER BY id",
            (args.bench,),
        ).fetchall()
        questions = [q for _t, q, _e in rows]
        tenants = {q: t for t, q, _e in rows}
        qembs = {q: (e if args.qemb else None) for _t, q, e in rows}
    else:
        questions = load("pgdocs-dev.jsonl") + load("offtopic.jsonl", args.offtopic)
        qembs = {q: None for q in questions}
        if args.qemb:
            with psycopg.connect(args.embed_dsn or args.dsn, autocommit=True) as e:
                for q in questions:
                    qembs[q] = e.execute("SELECT rag.embed(%s)::text", (q,)).fetchone()[0]
    for s in probe_sources(Path(args.sql_dir)):
        owner.execute(s)
    owner.execute("SET track_functions = 'all'")

    laps: dict[str, list[float]] = {}
    fn_self: dict[str, float] = {}
    fn_calls: dict[str, int] = {}
    whole: dict[str, list[float]] = {"ask (reader, whole call)": [], "retrieve (reader, k 5, qemb)": []}
    retrieve_emb: dict[str, str] = {}
    n_counted = 0

    for rnd in range(args.rounds):
        for q in questions:
            qemb = qembs[q]
            tenant = tenants.get(q, args.tenant)
            # 1. laps
            owner.execute("BEGIN")
            t0 = time.perf_counter()
            owner.execute(
                "SELECT status FROM pg_temp._ask_probe(%s, %s, %s, 5, %s::vector, '{}')",
                (args.reader, q, tenant, qemb),
            ).fetchone()
            t1 = time.perf_counter()
            got = owner.execute("SELECT current_setting('pgcite_probe.laps')").fetchone()[0]
            t2 = time.perf_counter()
            owner.execute("COMMIT")
            t3 = time.perf_counter()
            # 2. functions
            # (the view shows the backend's counts not yet flushed, which no flush changes inside a
            # transaction: the difference is this ask's)
            owner.execute("BEGIN")
            before = {r[0]: r[1:] for r in owner.execute(FUNCTIONS).fetchall()}
            owner.execute(
                "SELECT status FROM rag._ask(%s, %s, %s, 5, %s::vector, '{}')",
                (args.reader, q, tenant, qemb),
            ).fetchone()
            fns = [
                (n, c - before.get(n, (0, 0.0))[0], ms - before.get(n, (0, 0.0))[1])
                for n, c, ms in owner.execute(FUNCTIONS).fetchall()
            ]
            owner.execute("COMMIT")
            # 3. whole calls
            t4 = time.perf_counter()
            reader.execute("SELECT status FROM rag.ask(%s, %s, 5, %s::vector)", (q, tenant, qemb)).fetchone()
            t5 = time.perf_counter()
            emb = qemb or retrieve_emb.get(q)
            if emb is None:
                emb = retrieve_emb[q] = owner.execute("SELECT rag.embed(%s)::text", (q,)).fetchone()[0]
            t6 = time.perf_counter()
            reader.execute(
                "SELECT count(*) FROM rag.retrieve(%s, %s, 5, %s::vector)", (q, tenant, emb)
            ).fetchone()
            t7 = time.perf_counter()
            if rnd == 0:
                continue
            n_counted += 1
            inside = 0.0
            for part in got.strip(";").split(";"):
                name, ms = part.split("=")
                laps.setdefault(name, []).append(float(ms))
                inside += float(ms)
            laps.setdefault("(probe call, client, less the laps)", []).append((t1 - t0) * 1000 - inside)
            laps.setdefault("COMMIT (client)", []).append((t3 - t2) * 1000)
            whole["ask (reader, whole call)"].append((t5 - t4) * 1000)
            whole["retrieve (reader, k 5, qemb)"].append((t7 - t6) * 1000)
            for name, calls, self_ms in fns:
                fn_self[name] = fn_self.get(name, 0.0) + self_ms
                fn_calls[name] = fn_calls.get(name, 0) + calls

    total = sum(statistics.mean(v) for v in laps.values())
    path = "core path, question embedding passed" if args.qemb else "question embedded in the database"
    print(f"{args.label}{n_counted} asks ({path}); mean of the stages' sum {total:.2f} ms")
    print("| stage | p50 ms | p95 ms | mean ms | share of the mean ask |")
    print("|---|---|---|---|---|")
    for name, v in laps.items():
        # a stage that ran in only some asks (abstain, reach) is averaged over every ask
        mean = sum(v) / n_counted
        print(
            f"| {name} | {pct(v, 0.5):.3f} | {pct(v, 0.95):.3f} | {mean:.3f} | {100 * mean / total:.1f} % |"
        )
    for name, v in whole.items():
        print(f"| {name} | {pct(v, 0.5):.2f} | {pct(v, 0.95):.2f} | {statistics.mean(v):.2f} | |")
    print()
    print("| function (track_functions = all) | calls per ask | self ms per ask |")
    print("|---|---|---|")
    for name in sorted(fn_self, key=lambda n: -fn_self[n]):
        if fn_self[name] / n_counted < 0.02:
            continue
        print(f"| {name} | {fn_calls[name] / n_counted:.1f} | {fn_self[name] / n_counted:.3f} |")


if __name__ == "__main__":
    main()
