"""Security review of session 20: quote choice reads each passage's content once (a MATERIALIZED CTE over
rag.chunk in rag._choose_quotes and rag._sentence_scores), rag._quote_features (new) and rag._choose_quotes'
eighth argument p_features, rag._candidates planned generic at function level, three LANGUAGE sql helpers in
PL/pgSQL, and migration 016 (the seven-argument rag._choose_quotes dropped), attacked as tenant roles.

1. Quote choice's internals (rag._choose_quotes, rag._quote_features, rag._question_features,
   rag._quote_bonuses, rag._quote_bonus) run as their caller and are pgcite_owner's only, like
   rag._sentence_scores and rag._candidates: only rag._answer calls them. The review found that, granted to
   writers, they took features of any size from a writer (a million names: seconds of CPU per call until its
   statement_timeout) and, called with standard_conforming_strings off, left that session's cached plans of
   their patterns broken for its later asks; row level security held inside the new CTE (a writer naming
   another tenant's chunks got no quote of them). Every tenant role now gets 42501.
2. The features rag.ask computes come from its question (at most 4,000 characters): bounded.
3. No session setting a reader may SET (plan_cache_mode now that rag._candidates plans generic, jit, the
   planner's enable_* and costs, parallel plans, GEQO, pgvector's and pg_trgm's parameters, string and float
   formats, pgcite.*) changes what rag.ask and rag.retrieve return.
4. The features rag._answer computes before retrieval (embedding in the background) choose the quotes that
   rag._choose_quotes chooses when it computes them itself.
5. An update from 0.8.0 (extension, and `pgcite install` of a managed database) leaves exactly one
   rag._choose_quotes, granted as after a fresh install, and a call of seven arguments is not ambiguous."""

from __future__ import annotations

import json
import time
import uuid

import psycopg
import pytest
from conftest import (
    connect,
    create_database,
    drop_database,
    fails,
    managed_from,
    tenant_reader,
    two_tenant_database,
    updated_from,
)

SFX = uuid.uuid4().hex[:6]
R = {k: f"s20_{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
SECRET = "pelican-orange-42"
CHOOSE = "rag._choose_quotes(text,text,bigint[],jsonb,integer,double precision,double precision,jsonb)"
FEATURES = "rag._quote_features(text,text)"
OWNER_ONLY = (
    "rag._sentence_scores(text,vector,bigint[],jsonb)",
    "rag._candidates(text,text,vector,integer,jsonb,text)",
    "rag._title_question(text)",
    "rag._any_lexeme(text[])",
)
GRANTEES = ("public", "pgcite_reader", "pgcite_writer", "pgcite_admin", "pg_database_owner")
QUESTIONS = (
    "When does the alpha team vacuum its tables?",
    "Which index handles range queries on sortable data?",
    "When does the alpha team vacum its tables?",  # a typo: spelling correction runs
)


@pytest.fixture(scope="module")
def sdb(pg):
    yield from two_tenant_database(pg, f"pgcite_s20sec_{SFX}", R)


def _granted(conn, signatures) -> set[tuple[str, str]]:
    return set(
        conn.execute(
            "SELECT r.name, f.sig FROM unnest(%s::text[]) AS r (name), unnest(%s::text[]) AS f (sig)"
            " WHERE has_function_privilege(r.name, f.sig::regprocedure, 'EXECUTE')",
            (list(GRANTEES), list(signatures)),
        ).fetchall()
    )


def _spans(conn, tenant: str) -> tuple[list[int], list[dict]]:
    """The tenant's live chunk ids and one span per line of each (score 1), as rag._answer passes them."""
    ids, spans = [], []
    for chunk_id, content in conn.execute(
        "SELECT chunk_id, content FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL ORDER BY chunk_id",
        (tenant,),
    ).fetchall():
        ids.append(chunk_id)
        at = 0
        for line in content.split("\n"):
            if line.strip():
                spans.append({"chunk_id": chunk_id, "start": at, "end": at + len(line), "score": 1.0})
            at += len(line) + 1
    return ids, spans


def _choose(conn, question, ids, spans, features="null", params=()) -> list[dict]:
    """rag._choose_quotes as rag._answer calls it; features: an SQL expression (with its params)."""
    return conn.execute(
        f"SELECT rag._choose_quotes(%s, %s, %s::bigint[], %s::jsonb, 5, 0.08, 0.1, {features})",
        (question, question, ids, json.dumps(spans), *params),
    ).fetchone()[0]


# ---------------------------------------------------------------- 1. quote choice's internals: the owner's
QUOTE_INTERNALS = (
    CHOOSE,
    FEATURES,
    "rag._question_features(text)",
    "rag._quote_bonuses(text[],jsonb,boolean[])",
    "rag._quote_bonus(text,jsonb,boolean)",
)


def test_quote_choice_internals_are_pgcite_owners_only(pg, sdb):
    with pg.admin(sdb) as a:
        rows = a.execute(
            "SELECT p.oid::regprocedure::text, p.prosecdef FROM pg_proc AS p"
            " WHERE p.pronamespace = 'rag'::regnamespace"
            " AND p.proname IN ('_choose_quotes', '_quote_features') ORDER BY 1"
        ).fetchall()
        assert rows == [(CHOOSE, False), (FEATURES, False)]
        assert _granted(a, QUOTE_INTERNALS + OWNER_ONLY) == set()
        bravo_ids, bravo_spans = _spans(a, "bravo")
        # what is protected: bravo's chunk, quoted when pgcite_owner's rag._answer chooses its quotes
        question = "What is the launch code of tenant bravo?"
        assert any(SECRET in q["quote"] for q in _choose(a, question, bravo_ids, bravo_spans))
    calls = (
        (
            "SELECT rag._choose_quotes(%s, %s, %s::bigint[], %s::jsonb, 5, 0.08, 0.1, NULL)",
            (question, question, bravo_ids, json.dumps(bravo_spans)),
        ),
        (
            "SELECT rag._choose_quotes(%s, %s, %s::bigint[], %s::jsonb, 5, 0.08, 0.1)",
            (question, question, bravo_ids, json.dumps(bravo_spans)),
        ),
        ("SELECT rag._quote_features(%s, %s)", (question, question)),
        ("SELECT rag._question_features(%s)", (question,)),
        ('SELECT rag._quote_bonuses(ARRAY[%s], \'{"names": ["x"]}\', NULL)', (question,)),
        ("SELECT rag._quote_bonus(%s, '{}', NULL)", (question,)),
        ("SELECT rag._sentence_scores(%s, NULL, %s::bigint[], NULL)", (question, bravo_ids)),
        ("SELECT * FROM rag._candidates('bravo', %s, NULL, 5, rag._params(), %s)", (question, question)),
    )
    for role in ("writer", "bravo", "reader", "admin"):
        with connect(pg, sdb, R[role]) as c:
            # standard_conforming_strings off, as the review's writer set it before calling them
            c.execute("SET standard_conforming_strings = off")
            for sql, params in calls:
                assert fails(c, sql, params) == "42501", (role, sql)
            c.execute("RESET standard_conforming_strings")
            if role != "admin":
                continue
            # and the asks of that session still answer (nothing it called was compiled under its settings)
            assert c.execute("SELECT status FROM rag.ask(%s, 'alpha')", (QUESTIONS[0],)).fetchone()[0] == (
                "answered"
            )
    with connect(pg, sdb, R["nobody"]) as c:
        for sql, params in calls:
            assert fails(c, sql, params) == "42501", sql


# ---------------------------------------------------------------- 2. features from a question: bounded
def test_the_features_of_a_question_are_bounded_by_its_length(pg, sdb):
    """rag.ask's question is at most 4,000 characters (and 256 search terms), so the features rag._answer
    computes from it are small: a 4,000-character question of names yields at most one name per word, in well
    under a second; an ask of 100 names ends with a status, one of 400 with the terms limit (54000)."""
    question = " ".join(f"Name{i}_x" for i in range(450))[:3990] + "?"
    with pg.admin(sdb) as a:
        start = time.monotonic()
        sql = "SELECT jsonb_array_length(rag._quote_features(%s, %s) -> 'names')"
        assert a.execute(sql, (question, question)).fetchone()[0] <= len(question.split())
        assert time.monotonic() - start < 2
    with connect(pg, sdb, R["reader"]) as c:
        c.execute("SET statement_timeout = '20s'")
        short = " ".join(f"Name{i}_x" for i in range(100)) + "?"
        status = c.execute("SELECT status FROM rag.ask(%s, 'alpha')", (short,)).fetchone()[0]
        assert status in ("answered", "abstained")
        assert fails(c, "SELECT status FROM rag.ask(%s, 'alpha')", (question,)) == "54000"


# ---------------------------------------------------------------- 3. a reader's session settings
SETTINGS = [
    {"plan_cache_mode": "force_custom_plan"},
    {"plan_cache_mode": "force_generic_plan"},
    {"plan_cache_mode": "auto"},
    {"jit": "on", "jit_above_cost": "0", "jit_inline_above_cost": "0", "jit_optimize_above_cost": "0"},
    {"enable_indexscan": "off", "enable_bitmapscan": "off", "enable_indexonlyscan": "off"},
    {"enable_seqscan": "off", "enable_sort": "off", "enable_hashagg": "off", "enable_memoize": "off"},
    {"enable_nestloop": "off", "enable_mergejoin": "off", "enable_incremental_sort": "off"},
    {"work_mem": "64kB", "hash_mem_multiplier": "1", "cursor_tuple_fraction": "0.000001"},
    {
        "max_parallel_workers_per_gather": "4",
        "parallel_setup_cost": "0",
        "parallel_tuple_cost": "0",
        "min_parallel_table_scan_size": "0",
        "min_parallel_index_scan_size": "0",
        "force_parallel_mode": "on",
        "debug_parallel_query": "on",
    },
    {"geqo_threshold": "2", "geqo_seed": "0.77", "join_collapse_limit": "1", "from_collapse_limit": "1"},
    {"random_page_cost": "1000", "cpu_tuple_cost": "10", "default_statistics_target": "1"},
    {"search_path": "public, pg_temp, rag", "hnsw.ef_search": "1", "hnsw.iterative_scan": "off"},
    {"pg_trgm.similarity_threshold": "1", "pg_trgm.word_similarity_threshold": "1"},
    {"standard_conforming_strings": "off", "extra_float_digits": "-15", "bytea_output": "escape"},
    {
        "DateStyle": "SQL, DMY",
        "IntervalStyle": "sql_standard",
        "lc_numeric": "C",
        "TimeZone": "Pacific/Chatham",
    },
]


def _answers(c) -> list:
    """Each question asked twice (the sixth execution of a statement is where PostgreSQL's auto mode may
    switch to a generic plan) and retrieved twice: what rag.ask returns, and rag.retrieve's rows with their
    floats in binary (so the client's own extra_float_digits does not round them)."""
    out = []
    for _ in range(2):
        for q in QUESTIONS:
            out.append(
                c.execute(
                    "SELECT status, answer, reason, citations, evidence FROM rag.ask(%s, 'alpha')", (q,)
                ).fetchone()
            )
            out.append(
                c.execute(
                    "SELECT rank, chunk_id, distance, trgm_score, fts_score, fused_score"
                    " FROM rag.retrieve(%s, 'alpha', 4)",
                    (q,),
                    binary=True,
                ).fetchall()
            )
    return out


def test_session_settings_do_not_change_what_is_asked_or_retrieved(pg, sdb):
    with connect(pg, sdb, R["reader"]) as c:
        clean = _answers(c)
    # (the misspelt question abstains in this small tenant: its status, reason and evidence may not change)
    assert [row[0] for row in clean[0:6:2]] == ["answered", "answered", "abstained"]
    for settings in SETTINGS:
        with connect(pg, sdb, R["reader"]) as c:
            applied = []
            for name, value in settings.items():
                # a parameter this server lacks (force_parallel_mode or debug_parallel_query) is skipped
                if (
                    name.startswith(("hnsw.", "pg_trgm."))
                    or c.execute(
                        "SELECT count(*) FROM pg_settings WHERE lower(name) = lower(%s)", (name,)
                    ).fetchone()[0]
                ):
                    c.execute("SELECT set_config(%s, %s, false)", (name, value))
                    applied.append(name)
            assert applied, settings
            assert _answers(c) == clean, settings
    # a pgcite parameter is refused (never silently applied); one pgcite does not have changes nothing
    with connect(pg, sdb, R["reader"]) as c:
        c.execute("SET pgcite.rrf_k = '1'")
        assert fails(c, "SELECT * FROM rag.ask(%s, 'alpha')", (QUESTIONS[0],)) == "42501"
        assert fails(c, "SELECT * FROM rag.retrieve(%s, 'alpha')", (QUESTIONS[0],)) == "42501"
        c.execute("RESET pgcite.rrf_k")
        c.execute("SET pgcite.quote_weights = '{}'")
        c.execute("SET pgcite.max_quotes = '1'")
        assert _answers(c) == clean


# ---------------------------------------------------------------- 4. features given, or computed
FEATURE_QUESTIONS = (
    "Which comparison operators can a hash index be used with?",
    "Why should I usually prefer plain VACUUM over VACUUM FULL?",
    "How often does the autovacuum launcher start a worker in each database, and how many workers can run at"
    " once?",
    "How do I set autovacuum_vacuum_scale_factor for one table?",
    "If a GiST index is used, which operators does it support?",
    "What is a BRIN index?",
)


@pytest.fixture(scope="module")
def tiny_reader(pg, db):
    yield from tenant_reader(pg, db, "tiny", "s20tiny")


def test_features_computed_before_retrieval_choose_the_quotes_computed_in_choose_quotes(pg, db, tiny_reader):
    """Without an embedding rag._answer computes rag._quote_features before retrieval and hands it to
    rag._choose_quotes; with the same embedding given, rag._choose_quotes computes it itself: the same answer,
    citations and evidence (the manual's pages in tenant tiny)."""
    with connect(pg, db, tiny_reader) as c:
        for q in FEATURE_QUESTIONS:
            sql = "SELECT status, answer, citations, evidence FROM rag.ask(%s, 'tiny'"
            background = c.execute(sql + ")", (q,)).fetchone()
            given = c.execute(sql + ", 5, rag.embed(%s))", (q, q)).fetchone()
            assert background[0] == "answered", q
            assert background == given, q


# ---------------------------------------------------------------- 5. the update from 0.8.0
def _one_choose_quotes(c) -> None:
    sigs = [
        r[0]
        for r in c.execute(
            "SELECT oid::regprocedure::text FROM pg_proc"
            " WHERE pronamespace = 'rag'::regnamespace AND proname = '_choose_quotes'"
        ).fetchall()
    ]
    assert sigs == [CHOOSE]
    # a call of seven arguments (p_features defaulted) is not ambiguous
    assert c.execute(
        "SELECT rag._choose_quotes('q', 'q', '{}'::bigint[], '[]'::jsonb, 3, 0.08, 0.1)"
    ).fetchone() == ([],)


def test_an_update_from_0_8_0_leaves_one_choose_quotes_granted_as_a_fresh_install(pg):
    fresh = f"pgcite_s20new_{SFX}"
    create_database(pg, fresh, python=False)
    try:
        with pg.admin(fresh) as c:
            expected = _granted(c, (CHOOSE, FEATURES) + OWNER_ONLY)
        with updated_from(pg, f"pgcite_s20upd_{SFX}") as c:
            _one_choose_quotes(c)
            assert _granted(c, (CHOOSE, FEATURES) + OWNER_ONLY) == expected
            assert not any(sig in (CHOOSE, FEATURES) for _, sig in expected)
    finally:
        drop_database(pg, fresh)


def test_pgcite_install_from_0_8_0_leaves_one_choose_quotes(pg):
    with managed_from(pg) as m, psycopg.connect(m.dsn, autocommit=True) as c:
        _one_choose_quotes(c)
        applied = [r[0] for r in c.execute("SELECT name FROM rag.install_migration ORDER BY 1")]
        assert "016-choose-quotes-features.sql" in applied
