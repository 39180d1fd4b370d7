"""Security round 7 (0.7.0): what a tenant role's own session settings do to pgcite (docs/security.md
"Security round 7", docs/BENCHMARKS.md "Security round 7 (0.7.0)").

Any role may SET every parameter of context `user`, for its session (SET, its own ALTER ROLE ... SET, the
connection's `options` / PGOPTIONS) or for one transaction (SET LOCAL), before it calls rag.*. The functions
that answer, retrieve and log run as pgcite_owner but with the caller's settings unless they pin them. Each
test logs in as an ordinary role with hostile settings and compares with a session that has the defaults:
the audit chain verifies under anyone's settings, the answer, citations and retrieved rows are the same,
pgcite hands the caller's settings back, and an open transaction holds nothing of another tenant."""

from __future__ import annotations

import json
import time
import uuid

import psycopg
import pytest
from conftest import MANUAL, TINY_FILES, connect, fails, ingest_files, sqlstate_of, two_tenant_database

SFX = uuid.uuid4().hex[:6]
R = {k: f"{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
QUESTIONS = [
    "Which index handles range quries?",
    "How do I prevent transaction ID wraparound?",
    "What does VACUUM FULL do?",
    "Which index types support multicolumn indexes?",
    "What is a GIN index good for?",
    "How often should I run ANALYZE?",
]
# volatile parts of an entry: its id, its time and how long it took
VOLATILE = ("timings",)


@pytest.fixture(scope="module")
def adb(pg):
    for db in two_tenant_database(pg, f"pgcite_attack070_{SFX}", R):
        with pg.admin(db) as a:
            a.execute("SELECT rag.create_tenant('docs')")
            for role in ("reader", "writer"):
                a.execute("SELECT rag.grant_tenant('docs', %s)", (R[role],))
        if MANUAL.exists():
            with connect(pg, db, R["writer"]) as c:
                ingest_files(c, "docs", TINY_FILES)
        yield db


def tenant_of(pg, adb) -> str:
    """The manual's tenant when the PostgreSQL manual is installed (tens of chunks), else alpha's two."""
    return "docs" if MANUAL.exists() else "alpha"


def answers(c, tenant: str, rounds: int = 2) -> list:
    """What a reader is answered and what the log keeps of it, for every question, `rounds` times (past the
    five calls after which PL/pgSQL may use a generic plan), without ids and timings; and rag.retrieve's
    rows."""
    out = []
    for _ in range(rounds):
        for q in QUESTIONS:
            cur = c.execute("SELECT * FROM rag.ask(%s, %s)", (q, tenant))
            row = dict(zip([d.name for d in cur.description], cur.fetchone(), strict=True))
            logged = c.execute(
                "SELECT status, reason, answer, citations, evidence, fingerprint, settings, chunk_ids,"
                " query_embedding::text FROM rag.ask_log WHERE ask_id = %s",
                (row.pop("ask_id"),),
            ).fetchone()
            for key in VOLATILE:
                row.pop(key, None)
            evidence = {k: v for k, v in (logged[4] or {}).items() if k not in VOLATILE}
            out.append(
                ("ask", q, json.dumps(row, sort_keys=True, default=str), logged[:4], evidence, logged[5:])
            )
            out.append(
                ("retrieve", q, c.execute("SELECT * FROM rag.retrieve(%s, %s, 10)", (q, tenant)).fetchall())
            )
    return out


def verified(pg, adb, role: str, tenant: str) -> tuple:
    with connect(pg, adb, role) as c:
        return c.execute("SELECT ok, problem, unsealed FROM rag.verify_log(%s)", (tenant,)).fetchone()


@pytest.fixture(scope="module")
def expected(pg, adb):
    tenant = tenant_of(pg, adb)
    with connect(pg, adb, R["reader"]) as c:
        got = answers(c, tenant, rounds=1)
    assert got[0][3][0] == "answered", got[0]
    return tenant, got


# ---------------------------------------------------------------- 1. the audit log's hashes
FORMATTING = (
    "-c TimeZone=America/St_Johns -c DateStyle=SQL,DMY -c IntervalStyle=sql_standard -c extra_float_digits=3"
    " -c bytea_output=escape -c lc_numeric=C -c lc_monetary=C"
    " -c standard_conforming_strings=off -c quote_all_identifiers=on"
)


@pytest.mark.parametrize("how", ["options", "alter_role", "set_local"])
def test_a_tenants_formatting_settings_change_no_hash_of_the_audit_log(pg, adb, expected, how):
    """TimeZone, DateStyle, IntervalStyle, extra_float_digits, bytea_output, lc_numeric, lc_monetary,
    client_encoding, standard_conforming_strings and quote_all_identifiers, set by the asking reader through
    its connection's options, its own ALTER ROLE ... SET, or SET LOCAL in the transaction of rag.ask: the
    entry is the one a default session logs (timings and ids aside), and rag.verify_log recomputes every
    hash the same under the reader's settings and under an admin's defaults (no 'tampered' chain)."""
    tenant, want = expected
    kw = {}
    if how == "options":
        kw["options"] = FORMATTING
    try:
        if how == "alter_role":
            # an ordinary role may set its own session defaults
            with connect(pg, adb, R["reader"]) as c:
                for opt in FORMATTING.split(" -c "):
                    name, value = opt.replace("-c ", "").split("=")
                    c.execute(f"ALTER ROLE {R['reader']} SET {name} = '{value}'")
        with connect(pg, adb, R["reader"], **kw) as c:
            if how == "set_local":
                c.autocommit = False
                for opt in FORMATTING.split(" -c "):
                    name, value = opt.replace("-c ", "").split("=")
                    c.execute(f"SET LOCAL {name} = '{value}'")
            else:
                assert c.execute("SHOW TimeZone").fetchone()[0] == "America/St_Johns"
            got = answers(c, tenant, rounds=1)
            assert c.execute("SHOW DateStyle").fetchone()[0] == "SQL, DMY"
            c.commit()
            assert c.execute("SELECT ok, problem FROM rag.verify_log(%s)", (tenant,)).fetchone() == (
                True,
                None,
            )
    finally:
        with pg.admin(adb) as a:
            a.execute(f"ALTER ROLE {R['reader']} RESET ALL")
    assert got == want
    assert verified(pg, adb, R["admin"], tenant) == (True, None, 0)
    # and every entry's hash recomputed in a session with the defaults is the stored one
    with pg.admin(adb) as a:
        bad = a.execute(
            "SELECT count(*) FROM rag.ask_log AS l"
            " WHERE l.entry_hash <> sha256(convert_to(rag._log_entry_text(l), 'UTF8'))"
            " OR l.row_hash <> rag._log_row_hash(l)"
        ).fetchone()[0]
    assert bad == 0


# ---------------------------------------------------------------- 2. answers and citations
PLANNER = {
    "no_index_scans": "SET enable_indexscan = off; SET enable_bitmapscan = off;"
    " SET enable_indexonlyscan = off",
    "no_seqscan_sort_hash": "SET enable_seqscan = off; SET enable_sort = off; SET enable_hashjoin = off;"
    " SET enable_hashagg = off; SET enable_mergejoin = off; SET enable_nestloop = off",
    "costs_and_memory": "SET random_page_cost = 1000; SET cpu_tuple_cost = 10; SET work_mem = '64kB';"
    " SET hash_mem_multiplier = 1; SET cursor_tuple_fraction = 0.0001",
    "vector_gucs": "SET hnsw.ef_search = 1; SET hnsw.iterative_scan = off; SET hnsw.max_scan_tuples = 1;"
    " SET hnsw.scan_mem_multiplier = 1; SET ivfflat.probes = 1",
    "text_search": "SET pg_trgm.similarity_threshold = 1; SET pg_trgm.word_similarity_threshold = 0;"
    " SET pg_trgm.strict_word_similarity_threshold = 0; SET default_text_search_config = 'pg_catalog.simple';"
    " SET gin_fuzzy_search_limit = 1",
    "plans": "SET plan_cache_mode = force_generic_plan; SET geqo_threshold = 2; SET geqo_effort = 1;"
    " SET join_collapse_limit = 1; SET from_collapse_limit = 1",
    "parallel_jit": "SET max_parallel_workers_per_gather = 4; SET parallel_setup_cost = 0;"
    " SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;"
    " SET min_parallel_index_scan_size = 0;"
    " SET jit = on; SET jit_above_cost = 0; SET jit_inline_above_cost = 0; SET jit_optimize_above_cost = 0",
}


@pytest.mark.parametrize("ann", [False, True], ids=["exact", "approximate"])
@pytest.mark.parametrize("group", list(PLANNER))
def test_planner_and_index_settings_change_no_answer_or_citation(pg, adb, expected, group, ann):
    """A reader's planner switches, costs, memory, pgvector's and pg_trgm's parameters, text search config,
    plan cache mode, join search and parallel/JIT settings: rag.ask's status, answer, citations (quote
    offsets), evidence and fingerprint and rag.retrieve's rows are those of a default session, twelve calls
    in a row; with exact_search_limit 0 (an admin's setting) the vector leg takes its approximate path."""
    tenant, want = expected
    if ann:
        with pg.admin(adb) as a:
            a.execute("SELECT rag.set_config('exact_search_limit', '0')")
    try:
        with connect(pg, adb, R["reader"]) as c:
            for stmt in PLANNER[group].split(";"):
                c.execute(stmt)
            got = answers(c, tenant, rounds=2)
    finally:
        if ann:
            with pg.admin(adb) as a:
                a.execute("SELECT rag.set_config('exact_search_limit', NULL)")
    strip = [(x if x[0] == "retrieve" else x[:5] + (x[5][:1] + x[5][2:],)) for x in got]
    base = [(x if x[0] == "retrieve" else x[:5] + (x[5][:1] + x[5][2:],)) for x in want]
    # logged settings hold exact_search_limit itself; everything else must be equal
    assert strip == base * 2


def test_the_vector_legs_parameters_are_pinned_for_the_call_and_given_back(pg, adb, expected):
    """rag._candidates set hnsw.ef_search and hnsw.iterative_scan with set_config(..., true): inside a
    caller's transaction they stayed changed after rag.retrieve returned (a reader's SET LOCAL ef_search 10
    read 400 afterwards, iterative_scan relaxed_order), and hnsw.max_scan_tuples and scan_mem_multiplier were
    the caller's. Now the function pins all four for its call (SET clauses) and the caller's values are
    back when it returns; the rows are a default session's."""
    tenant, want = expected
    mine = {
        "hnsw.ef_search": "10",
        "hnsw.iterative_scan": "off",
        "hnsw.max_scan_tuples": "1",
        "hnsw.scan_mem_multiplier": "2",
    }
    with pg.admin(adb) as a:
        a.execute("SELECT rag.set_config('exact_search_limit', '0')")
    try:
        with connect(pg, adb, R["reader"]) as c:
            c.autocommit = False
            for name, value in mine.items():
                c.execute(f"SET LOCAL {name} = '{value}'")
            rows = [
                c.execute("SELECT * FROM rag.retrieve(%s, %s, 10)", (q, tenant)).fetchall() for q in QUESTIONS
            ]
            after = {n: c.execute("SELECT current_setting(%s)", (n,)).fetchone()[0] for n in mine}
            c.rollback()
    finally:
        with pg.admin(adb) as a:
            a.execute("SELECT rag.set_config('exact_search_limit', NULL)")
    assert after == mine
    assert rows == [x[2] for x in want if x[0] == "retrieve"]


# ---------------------------------------------------------------- 3. resources, locks, transactions
def test_a_tenants_open_transaction_holds_nothing_another_tenant_needs(pg, adb):
    """A reader undoes the DBA's idle_in_transaction_session_timeout (ALTER ROLE: the reader's own SET wins,
    as for every parameter of context user), sets lock_timeout and statement_timeout to 0, then leaves a
    transaction open after rag.ask, rag.retrieve and rag.verify_log of alpha (it holds alpha's log head).
    Another tenant's writer ingests, asks and verifies bravo's log, an admin reads bravo's and alpha's log
    heads, and another alpha reader asks: none of them waits (lock_timeout 2 s would fail with 55P03)."""
    with pg.admin(adb) as a:
        a.execute(f"ALTER ROLE {R['reader']} SET idle_in_transaction_session_timeout = '1s'")
    try:
        with connect(pg, adb, R["reader"]) as hold:
            assert hold.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "1s"
            hold.execute("SET idle_in_transaction_session_timeout = 0")
            hold.execute("SET lock_timeout = 0")
            hold.execute("SET statement_timeout = 0")
            hold.autocommit = False
            hold.execute("SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha')").fetchone()
            hold.execute("SELECT * FROM rag.retrieve('When does alpha vacuum?', 'alpha', 5)").fetchall()
            assert hold.execute("SELECT ok FROM rag.verify_log('alpha')").fetchone()[0] is True
            held = hold.execute(
                "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND granted"
            ).fetchone()[0]
            assert held > 0
            time.sleep(1.5)  # past the DBA's 1 s: the reader's own SET keeps its session
            assert hold.execute("SELECT 1").fetchone() == (1,)
            with connect(pg, adb, R["bravo"]) as b:
                b.execute("SET lock_timeout = '2s'")
                b.execute(
                    "SELECT * FROM rag.ingest('bravo', 'b2.md', '# Second\n\nBravo keeps a second note.\n')"
                )
                status = b.execute(
                    "SELECT status FROM rag.ask('What is the launch code?', 'bravo')"
                ).fetchone()
                assert status[0] in ("answered", "abstained")
                assert b.execute("SELECT ok, unsealed FROM rag.verify_log('bravo')").fetchone() == (True, 0)
                b.execute("SELECT rag.delete_document('bravo', 'b2.md')")
            with connect(pg, adb, R["admin"]) as a:
                a.execute("SET lock_timeout = '2s'")
                assert a.execute("SELECT unsealed FROM rag.log_head('bravo')").fetchone()[0] == 0
                a.execute("SELECT * FROM rag.log_head('alpha')").fetchone()
            with connect(pg, adb, R["writer"]) as w:  # another member of alpha
                w.execute("SET lock_timeout = '2s'")
                ask_id = w.execute(
                    "SELECT ask_id FROM rag.ask('When does alpha vacuum?', 'alpha')"
                ).fetchone()[0]
                assert ask_id is not None
                # its entry waits to be chained until the holder's transaction ends; it verifies meanwhile
                assert w.execute("SELECT ok, unsealed FROM rag.verify_log('alpha')").fetchone() == (True, 1)
            hold.rollback()
    finally:
        with pg.admin(adb) as a:
            a.execute(f"ALTER ROLE {R['reader']} RESET ALL")
    assert verified(pg, adb, R["admin"], "alpha") == (True, None, 0)


def test_session_settings_that_would_bypass_pgcite_are_refused_or_change_nothing(pg, adb):
    """session_replication_role (skips triggers: the statistics rag.chunk's triggers keep) is a superuser's:
    42501 for every tenant role. row_security = off never widens a read: the tenant's own reads of rag's
    tables are refused (42501; rag.ingest reads rag.config as the writer, so it is refused and stores
    nothing), while rag.ask, whose reads run as the tables' owner, answers and logs as usual.
    default_transaction_read_only: the ask answers and says it was not logged. A pgcite.* placeholder set to
    another value than rag.config's is refused (42501), and nothing is logged."""
    for role in ("reader", "writer", "admin", "nobody"):
        with connect(pg, adb, R[role]) as c:
            assert fails(c, "SET session_replication_role = replica") == "42501"
    with connect(pg, adb, R["writer"]) as c:
        docs = c.execute("SELECT count(*) FROM rag.document").fetchone()[0]
        c.execute("SET row_security = off")
        # rag.ingest reads rag.config as the writer (SECURITY INVOKER): refused, nothing stored
        body = "# Row security\n\nRow security stays on.\n"
        assert fails(c, "SELECT * FROM rag.ingest('alpha', 'rs.md', %s)", (body,)) == "42501"
        row = c.execute("SELECT status, ask_id FROM rag.ask('When does alpha vacuum?', 'alpha')").fetchone()
        assert row[0] == "answered" and row[1] is not None
        assert fails(c, "SELECT count(*) FROM rag.ask_log") == "42501"
        c.execute("RESET row_security")
        assert c.execute("SELECT count(*) FROM rag.document").fetchone()[0] == docs
        assert c.execute("SELECT count(*) FROM rag.ask_log WHERE ask_id = %s", (row[1],)).fetchone()[0] == 1
    with connect(pg, adb, R["reader"], options="-c default_transaction_read_only=on") as c:
        before = c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0]
        cur = c.execute("SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha')")
        row = dict(zip([d.name for d in cur.description], cur.fetchone(), strict=True))
        assert row["status"] == "answered" and row["ask_id"] is None
        assert c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0] == before
    with connect(pg, adb, R["reader"], options="-c pgcite.min_score=0") as c:
        before = c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0]
        assert fails(c, "SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha')") == "42501"
        assert c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0] == before


def test_no_sql_or_python_reads_a_pgcite_parameter_except_to_refuse_it():
    """Custom GUCs of a SQL-only extension are placeholders any role can SET. The only reads of pgcite.*
    parameters are rag._config_text and rag._params (which refuse a value that differs from rag.config's,
    42501) and the PL/Python fallback for a database whose SQL predates rag._config_text (0.2.0)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    hits = []
    paths = sorted((root / "sql").rglob("*.sql")) + sorted(
        (root / "python_udfs" / "pgcite_udfs").rglob("*.py")
    )
    for path in paths:
        for line in path.read_text().splitlines():
            if re.search(r"current_setting\(\s*'pgcite\.", line):
                hits.append((path.relative_to(root).as_posix(), line.strip()[:60]))
    assert sorted({p for p, _ in hits}) == ["python_udfs/pgcite_udfs/udf.py", "sql/core/000-access.sql"], hits
    assert len(hits) == 3, hits


# ======================================================== Security round 8 (0.7.0): this session's changes
# (docs/security.md "Security round 8", docs/BENCHMARKS.md "Security round 8 (0.7.0)")

CAL_QUESTIONS = [
    {"id": "a1", "question": "When does alpha vacuum?", "kind": "answerable"},
    {"id": "a2", "question": "Which index handles range queries?", "kind": "answerable"},
    {"id": "n1", "question": "What is the capital of Peru?", "kind": "out_of_corpus"},
]


def gates(pg, db) -> dict:
    with pg.admin(db) as a:
        return dict(a.execute("SELECT tenant, gate FROM rag.tenant ORDER BY tenant").fetchall())


@pytest.mark.parametrize(
    "bad",
    [
        {"false_answer_cost": "NaN"},
        {"false_answer_cost": "Infinity"},
        {"false_answer_cost": "-0"},
        {"false_answer_cost": "1e300"},
        {"expect": "alpha.md"},
        {"expect": {"anchor": "alpha.md"}},
        {"expect": [1, 2]},
    ],
    ids=lambda b: "-".join(f"{k}={v}" for k, v in b.items()),
)
def test_calibrate_refuses_a_cost_that_is_no_positive_number_or_an_expect_of_the_wrong_shape(pg, adb, bad):
    """A NaN false_answer_cost passed `<= 0` (NaN is above every number in PostgreSQL): every cost was NaN,
    the highest grid point won and the tenant's gate was stored with a threshold above every score and
    "false_answer_cost": "NaN". An "expect" that is no array failed only after the questions ran, with
    jsonb's "cannot extract elements from a scalar". Both are 22023 before any question runs, and no gate
    changes."""
    questions = [dict(q) for q in CAL_QUESTIONS]
    cost = bad.get("false_answer_cost", "2")
    if "expect" in bad:
        questions[0]["expect"] = bad["expect"]
    before = gates(pg, adb)
    with connect(pg, adb, R["admin"]) as a:
        with pytest.raises(psycopg.Error) as e:
            a.execute("SELECT * FROM rag.calibrate('alpha', %s, %s::float8)", (json.dumps(questions), cost))
        assert sqlstate_of(e) == "22023", e.value
        assert ("false_answer_cost" if "false_answer_cost" in bad else '"expect"') in str(e.value)
    assert gates(pg, adb) == before


def test_calibrate_is_refused_to_tenant_roles_and_changes_only_its_own_tenant(pg, adb):
    """A reader and a writer of alpha are refused rag.calibrate (42501, nothing stored) and its internals
    (rag._calibrate, rag._calibration_threshold: 42501). An admin's calibration of alpha with duplicated
    questions and labels (under ids of their own: a repeated id is 22023 since 0.9.0, nothing stored) and a
    cost at the bound stores alpha's gate only: bravo's gate and every other tenant's stay as they were, and
    the rows it returns cite only alpha's anchors."""
    questions = CAL_QUESTIONS + [
        {**CAL_QUESTIONS[0], "id": "a1-again"},
        {**CAL_QUESTIONS[2], "id": "n1-again"},
    ]
    before = gates(pg, adb)
    for role in ("reader", "writer"):
        with connect(pg, adb, R[role]) as c:
            assert fails(c, "SELECT * FROM rag.calibrate('alpha', %s)", (json.dumps(questions),)) == "42501"
            assert (
                fails(
                    c, "SELECT * FROM rag._calibrate(%s, 'alpha', %s, 2)", (R["admin"], json.dumps(questions))
                )
                == "42501"
            )
    assert gates(pg, adb) == before
    with connect(pg, adb, R["admin"]) as a:
        repeated = CAL_QUESTIONS + [dict(CAL_QUESTIONS[0])]
        assert fails(a, "SELECT * FROM rag.calibrate('alpha', %s)", (json.dumps(repeated),)) == "22023"
        assert gates(pg, adb) == before
        rows = a.execute(
            "SELECT id, top_anchor FROM rag.calibrate('alpha', %s, 1e6)", (json.dumps(questions),)
        ).fetchall()
    assert [r[0] for r in rows] == ["a1", "a2", "n1", "a1-again", "n1-again"]
    after = gates(pg, adb)
    assert after["alpha"] != before["alpha"] and after["alpha"]["false_answer_cost"] == 1e6
    assert after["alpha"]["calibrated_on"] == ["a1", "a2", "n1", "a1-again", "n1-again"]
    others = {k: v for k, v in before.items() if k != "alpha"}
    assert {k: v for k, v in after.items() if k != "alpha"} == others
    with pg.admin(adb) as a:
        bravo_anchors = {r[0] for r in a.execute("SELECT anchor FROM rag.chunk WHERE tenant = 'bravo'")}
    assert not {r[1] for r in rows} & bravo_anchors


@pytest.mark.parametrize(
    "answerable,unanswerable",
    [
        ("{0.5,0.5,0.5}", "{0.5,0.5}"),  # all equal: the bandwidth's floor
        ("{NaN,Infinity,-Infinity,0.7}", "{-0,0.1}"),  # non-finite scores left out
        ("{1000000,-1000000,0.5}", "{0.1,1e-300}"),  # the widest range kept, a tiny score
        ("{0.9}", "{0.1}"),  # one score per class
        ("{0.9,0.9,0.9,0.9}", "{0.1,0.1,0.1,0.1,0.95}"),  # duplicates, one negative above them
    ],
)
def test_the_calibration_rule_stays_finite_and_in_range_on_adversarial_scores(
    pg, adb, answerable, unanswerable
):
    """rag._calibration_threshold on degenerate and extreme scores: a finite threshold within the kept scores'
    range widened by four bandwidths, finite expected errors and bandwidths, a grid step no finer than
    1/32 of a quarter of the 0.001 floor (at most 464 points), in bounded time."""
    with pg.admin(adb) as a:
        t0 = time.monotonic()
        got = a.execute(
            "SELECT rag._calibration_threshold(%s::float8[], %s::float8[], 2)", (answerable, unanswerable)
        ).fetchone()[0]
        elapsed = time.monotonic() - t0
        kept = a.execute(
            "SELECT min(v), max(v) FROM unnest(%s::float8[] || %s::float8[]) AS v"
            " WHERE v <> 'NaN' AND v BETWEEN -1e6 AND 1e6",
            (answerable, unanswerable),
        ).fetchone()
    h = got["bandwidth"]["used"]
    assert 0.001 <= h < 1e7 and got["rule"] in ("smoothed_cost", "midpoint_of_gap")
    reach = 4 * h + 32 * got["grid"] + 1e-6  # the fine grid reaches one coarse step beyond the coarse one
    assert kept[0] - reach <= got["min_score"] <= kept[1] + reach, got
    for key in ("expected_false_abstain", "expected_false_answer"):
        assert 0 <= float(got[key]) <= 10, got
    assert got["grid"] > 0
    assert elapsed < 30  # generous on a loaded machine; a few ms each here


def test_the_calibration_rule_of_many_scores_honours_statement_timeout_and_an_empty_class_is_null(pg, adb):
    """10^5 scores (the grids cost 464 kernel sums per score, ~30 s): a statement_timeout cancels it (57014)
    and the session goes on; NULL when a class keeps no score (all NaN or infinite: rag.calibrate raises
    22000 then)."""
    with pg.admin(adb) as a:
        a.execute("SET statement_timeout = '500ms'")
        with pytest.raises(psycopg.Error) as e:
            a.execute(
                "SELECT rag._calibration_threshold(ARRAY(SELECT random() FROM generate_series(1, 100000)),"
                " '{0.1,0.2}', 2)"
            )
        assert sqlstate_of(e) == "57014"
        a.execute("RESET statement_timeout")
        assert a.execute(
            "SELECT rag._calibration_threshold('{0.9}', '{NaN,Infinity,-Infinity,1e7}', 2)"
        ).fetchone() == (None,)


# -------------------------------------------------------- round 8: the audit log's entries chained at once
def log_rows(pg, db, tenant: str) -> list:
    with pg.admin(db) as a:
        return a.execute(
            "SELECT ask_id, seq FROM rag.ask_log WHERE tenant = %s ORDER BY ask_id", (tenant,)
        ).fetchall()


def _asker(pg, db, role, tenant, mode, rounds, kept, lost, errors):
    """One connection asking `rounds` times in one way; kept / lost: the ask ids that must / must not be
    logged."""
    question = "When does alpha vacuum?" if tenant == "alpha" else "What is the launch code?"
    ask = "SELECT ask_id FROM rag.ask(%s, %s)"
    try:
        with connect(pg, db, role) as c:
            c.execute("SET lock_timeout = '10s'")
            for i in range(rounds):
                q = f"{question} ({mode} {i})"
                if mode == "autocommit":
                    kept.append(c.execute(ask, (q, tenant)).fetchone()[0])
                elif mode == "two_then_rollback":
                    c.execute("BEGIN")
                    lost.append(c.execute(ask, (q, tenant)).fetchone()[0])
                    lost.append(c.execute(ask, (q + " again", tenant)).fetchone()[0])
                    c.execute("ROLLBACK")
                elif mode == "savepoint":
                    c.execute("BEGIN")
                    first = c.execute(ask, (q, tenant)).fetchone()[0]
                    c.execute("SAVEPOINT s")
                    undone = c.execute(ask, (q + " undone", tenant)).fetchone()[0]
                    c.execute("ROLLBACK TO SAVEPOINT s")
                    last = c.execute(ask, (q + " after", tenant)).fetchone()[0]
                    c.execute("COMMIT")
                    kept.extend([first, last])
                    lost.append(undone)
                elif mode == "serializable":
                    c.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                    got = c.execute(ask, (q, tenant)).fetchone()[0]
                    try:
                        c.execute("COMMIT")
                        kept.append(got)
                    except psycopg.errors.SerializationFailure:
                        lost.append(got)
                elif mode == "read_only":
                    c.execute("BEGIN READ ONLY")
                    got = c.execute(ask, (q, tenant)).fetchone()[0]
                    c.execute("COMMIT")
                    if got is not None:
                        lost.append(got)
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(f"{role} {mode}: {e!r}")


def test_concurrent_asks_of_two_tenants_in_every_kind_of_transaction_keep_each_chain_gap_free(pg, adb):
    """rag._append_log chains an entry at once when it holds the head (SKIP LOCKED) and sees no unsealed
    entry, else inserts it unchained for rag._seal_log (branch i10g). Ten connections ask alpha and bravo at
    once: autocommit, two asks rolled back, a savepoint rolled back between two kept asks, SERIALIZABLE, READ
    ONLY. Afterwards every committed ask is in its tenant's log exactly once, no rolled-back one is, each
    tenant's seq runs 1..n without a gap or a repeat, every entry is sealed after one more ask, and
    rag.verify_log is ok for both; no connection waited past its lock_timeout."""
    import threading

    before = {t: {a for a, _ in log_rows(pg, adb, t)} for t in ("alpha", "bravo")}
    plan = [
        ("reader", "alpha", "autocommit", 4),
        ("writer", "alpha", "autocommit", 4),
        ("reader", "alpha", "two_then_rollback", 2),
        ("writer", "alpha", "savepoint", 2),
        ("reader", "alpha", "serializable", 3),
        ("writer", "alpha", "read_only", 2),
        ("bravo", "bravo", "autocommit", 4),
        ("bravo", "bravo", "savepoint", 2),
        ("bravo", "bravo", "serializable", 2),
        ("bravo", "bravo", "two_then_rollback", 2),
    ]
    kept = {"alpha": [], "bravo": []}
    lost = {"alpha": [], "bravo": []}
    errors: list = []
    threads = [
        threading.Thread(target=_asker, args=(pg, adb, R[r], t, m, n, kept[t], lost[t], errors))
        for r, t, m, n in plan
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    assert not errors, errors
    for tenant, role in (("alpha", "reader"), ("bravo", "bravo")):
        with connect(pg, adb, R[role]) as c:  # seals what the others left unchained
            kept[tenant].append(
                c.execute("SELECT ask_id FROM rag.ask('Anything else?', %s)", (tenant,)).fetchone()[0]
            )
        rows = log_rows(pg, adb, tenant)
        ids = [a for a, _ in rows]
        new = set(ids) - before[tenant]
        assert new == set(kept[tenant]), (tenant, sorted(new ^ set(kept[tenant])))
        assert not set(lost[tenant]) & set(ids)
        assert len(ids) == len(set(ids))
        assert sorted(s for _, s in rows) == list(range(1, len(rows) + 1)), rows
        assert verified(pg, adb, R["admin"], tenant) == (True, None, 0)


def test_an_open_transaction_holding_the_head_delays_no_ask_and_its_end_lets_the_next_ask_chain_all(pg, adb):
    """A writer of alpha asks in an open transaction: its entry is chained at once and it holds alpha's log
    head until it ends. Meanwhile alpha's reader asks three times and bravo once, with lock_timeout 1 s: none
    waits; alpha's entries are left unchained (verify_log ok, 3 unsealed), bravo's is sealed. The holder
    commits or rolls back; the next ask of alpha chains the waiting entries after the holder's (or in its
    place), in ask_id order, and the chain verifies gap-free."""
    for end in ("COMMIT", "ROLLBACK"):
        with connect(pg, adb, R["writer"]) as hold:
            hold.execute("BEGIN")
            held = hold.execute("SELECT ask_id FROM rag.ask('When does alpha vacuum?', 'alpha')").fetchone()[
                0
            ]
            head = hold.execute("SELECT seq FROM rag.ask_log WHERE ask_id = %s", (held,)).fetchone()[0]
            assert head is not None  # chained in its own transaction
            waiting = []
            with connect(pg, adb, R["reader"]) as r, connect(pg, adb, R["bravo"]) as b:
                for c in (r, b):
                    c.execute("SET lock_timeout = '1s'")
                    c.execute("SET statement_timeout = '60s'")
                for i in range(3):
                    waiting.append(
                        r.execute("SELECT ask_id FROM rag.ask(%s, 'alpha')", (f"Indexes? {i}",)).fetchone()[0]
                    )
                assert r.execute("SELECT ok, unsealed FROM rag.verify_log('alpha')").fetchone() == (True, 3)
                b.execute("SELECT ask_id FROM rag.ask('What is the launch code?', 'bravo')").fetchone()
                assert b.execute("SELECT ok, unsealed FROM rag.verify_log('bravo')").fetchone() == (True, 0)
            hold.execute(end)
        with connect(pg, adb, R["reader"]) as r:
            last = r.execute("SELECT ask_id FROM rag.ask('Anything else?', 'alpha')").fetchone()[0]
        rows = dict(log_rows(pg, adb, "alpha"))
        first = head if end == "COMMIT" else head - 1
        assert (held in rows) == (end == "COMMIT")
        assert [rows[a] for a in waiting + [last]] == list(range(first + 1, first + 5))
        assert sorted(rows.values()) == list(range(1, len(rows) + 1))
        assert verified(pg, adb, R["admin"], "alpha") == (True, None, 0)


# ---------------------------------------------------- round 8: the vector leg's re-score from the ANN scan
TIE_DOC = "# Tie note\n\nThe alpha team keeps its spare keys in the blue drawer of the night desk.\n"
CHURN = [
    "# Churn\n\nThe alpha team keeps its spare keys in the red box under the stairs.\n",
    "# Churn\n\nThe alpha team keeps its spare keys with the porter of the north gate.\n",
]
KEYS_Q = "Where does the alpha team keep its spare keys?"


def _churn(pg, db, rounds, errors):
    try:
        with connect(pg, db, R["writer"]) as w:
            for i in range(rounds):
                w.execute("SELECT * FROM rag.ingest('alpha', 'churn.md', %s)", (CHURN[i % 2],))
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(repr(e))


def test_the_ann_re_score_keeps_ties_tenants_and_versions_as_exact_search_does(pg, adb):
    """With exact_search_limit 0 every tenant's vector leg goes through the ANN query, whose rows now carry
    their exact distance and tie-break keys (no second read by primary key). Alpha holds the same text under
    two keys (an exact tie), bravo the same text again (the same distance from another tenant), and a
    retired version of it. rag.retrieve by the ANN path returns exactly what exact search returns (ids, keys,
    order, distances): the four arrays stay aligned, ties go by (doc_key, chunk_index), no bravo row and no
    retired one. While a writer of alpha re-ingests one document 12 times, every ANN retrieve sees one
    version of it (the function is STABLE: the scan and the re-score share one snapshot)."""
    import threading

    with pg.admin(adb) as a:
        a.execute("SELECT * FROM rag.ingest('alpha', 'tie-1.md', %s)", (TIE_DOC,))
        a.execute("SELECT * FROM rag.ingest('alpha', 'tie-2.md', %s)", (TIE_DOC,))
        a.execute("SELECT * FROM rag.ingest('alpha', 'retired.md', %s)", (TIE_DOC,))
        a.execute("SELECT rag.delete_document('alpha', 'retired.md')")
        a.execute("SELECT * FROM rag.ingest('bravo', 'tie-b.md', %s)", (TIE_DOC,))
        a.execute("SELECT * FROM rag.ingest('alpha', 'churn.md', %s)", (CHURN[0],))
        bravo_ids = {r[0] for r in a.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'bravo'")}
    sql = "SELECT chunk_id, doc_key, doc_version, chunk_index, distance FROM rag.retrieve(%s, 'alpha', 20)"
    try:
        with connect(pg, adb, R["reader"]) as r:
            exact = r.execute(sql, (KEYS_Q,)).fetchall()
            with pg.admin(adb) as a:
                a.execute("SELECT rag.set_config('exact_search_limit', '0')")
            for _ in range(6):  # past PL/pgSQL's five calls
                assert r.execute(sql, (KEYS_Q,)).fetchall() == exact
            keys = [row[1] for row in exact]
            assert "retired.md" not in keys and keys.index("tie-1.md") < keys.index("tie-2.md")
            assert not {row[0] for row in exact} & bravo_ids
            errors: list = []
            writer = threading.Thread(target=_churn, args=(pg, adb, 12, errors))
            writer.start()
            seen = 0
            while writer.is_alive() or seen == 0:
                rows = r.execute(sql, (KEYS_Q,)).fetchall()
                churn = {row[2] for row in rows if row[1] == "churn.md"}
                assert len(churn) <= 1, rows
                assert not {row[0] for row in rows} & bravo_ids
                seen += 1
            writer.join()
            assert not errors, errors
    finally:
        with pg.admin(adb) as a:
            a.execute("SELECT rag.set_config('exact_search_limit', '20000')")
            for key in ("tie-1.md", "tie-2.md", "churn.md"):
                a.execute("SELECT rag.delete_document('alpha', %s)", (key,))
            a.execute("SELECT rag.delete_document('bravo', 'tie-b.md')")


def test_a_tenant_role_can_lock_nothing_of_the_log_and_a_cancelled_calibration_stores_nothing(pg, adb):
    """The log head is held only by pgcite's own functions: a reader cannot take a row lock on rag.log_head,
    rag.ask_log or rag.tenant, nor a table lock stronger than ACCESS SHARE (which blocks no insert or update),
    so it cannot stall another tenant's asks or keep their entries unsealed. An admin's rag.calibrate
    cancelled by its statement_timeout (57014) stores no gate."""
    with connect(pg, adb, R["reader"]) as c:
        c.autocommit = False
        for sql in (
            "SELECT 1 FROM rag.log_head FOR KEY SHARE",
            "SELECT 1 FROM rag.ask_log FOR SHARE",
            "SELECT 1 FROM rag.tenant FOR KEY SHARE",
            "LOCK TABLE rag.log_head IN ROW SHARE MODE",
            "LOCK TABLE rag.ask_log IN SHARE MODE",
            "LOCK TABLE rag.tenant IN SHARE MODE",
        ):
            assert fails(c, sql) == "42501", sql
    before = gates(pg, adb)
    many = [dict(q, id=f"{q['id']}-{i}") for i in range(40) for q in CAL_QUESTIONS]
    with connect(pg, adb, R["admin"]) as a:
        a.execute("SET statement_timeout = '300ms'")
        assert fails(a, "SELECT * FROM rag.calibrate('alpha', %s)", (json.dumps(many),)) == "57014"
    assert gates(pg, adb) == before
