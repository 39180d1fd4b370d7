"""Security round 11 (0.9.0): what one call of a hostile tenant role costs, and what it can hold up
(docs/security.md "Security round 11", docs/BENCHMARKS.md "Security round 11 (0.9.0, session 11)").

1. A question of many search terms: ts_rank_cd's cost grew faster than the terms of the question's full-text
   query (600 of a tenant's frequent words: 10-24 s for one rag.ask / rag.explain against 0.06 s). Now a
   query of more than 256 terms is reduced to its distinct items and refused with 54000 beyond 256 of them.
2. Retiring a document (rag.delete_document, or an ingest that replaces it) of many new words in a young
   database: the trigger that uncounts them compared every zeroed row with every key (182 s for 1,000 chunks).
3. Resource limits a DBA sets for a role hold inside pgcite's SECURITY DEFINER calls; no function sets one."""

from __future__ import annotations

import json
import random

import psycopg
import pytest
from conftest import connect, fails, two_tenant_database

SFX = __import__("uuid").uuid4().hex[:6]
R = {k: f"{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
EMB = [0.05] * 383 + [0.9]
# the question of the paragraph test: a passage of prose with its repeats (about 400 terms, 190 distinct)
PROSE = (
    "Sets the base maximum amount of memory to be used by a query operation such as a sort or hash"
    " table before "
    "writing to temporary disk files. If this value is specified without units, it is taken as"
    " kilobytes. The "
    "default value is four megabytes. Note that a complex query might perform several sort and hash"
    " operations at "
    "the same time, with each operation generally being allowed to use as much memory as this value"
    " specifies "
    "before it starts to write data into temporary files. Also, several running sessions could be doing such "
    "operations concurrently. Therefore, the total memory used could be many times the value of"
    " work_mem; it is "
    "necessary to keep this fact in mind when choosing the value. Sort operations are used for ORDER"
    " BY, DISTINCT, "
    "and merge joins. Hash tables are used in hash joins, hash-based aggregation, memoize nodes and"
    " hash-based "
    "processing of IN subqueries. "
)


def words(n: int, seed: int, length: int = 7) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice("bcdfghjklmnpqrstvwxz") for _ in range(length)) for _ in range(n)]


@pytest.fixture(scope="module")
def adb(pg):
    yield from two_tenant_database(pg, f"pgcite_attack090_{SFX}", R)


# ---------------------------------------------------------------- 1. many search terms
def test_a_question_of_more_than_256_distinct_search_terms_is_54000(pg, adb):
    """600 distinct words (3,900 characters, under the 4,000-character limit) made one rag.ask of a 470-chunk
    tenant take 10-17 s and rag.explain 24 s (ts_rank_cd over the full-text candidates; 0.06 s for a normal
    question): every entry point that retrieves now refuses it with 54000 before any leg runs, and logs
    nothing."""
    q = " ".join(words(600, 1, 5))
    assert len(q) < 4000
    with connect(pg, adb, R["reader"]) as c:
        before = c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0]
        for sql in (
            "SELECT * FROM rag.ask(%s, 'alpha')",
            "SELECT * FROM rag.retrieve(%s, 'alpha')",
            "SELECT * FROM rag.explain(%s, 'alpha')",
            "SELECT * FROM rag.context(%s, 'alpha')",
        ):
            assert fails(c, sql, (q,)) == "54000", sql
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.ask(%s, 'alpha')", (q,))
        assert "600 search terms" in str(e.value) and "limit of 256" in str(e.value)
        assert c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0] == before
        # 256 distinct terms are still a question
        status = c.execute(
            "SELECT status FROM rag.ask(%s, 'alpha')", (" ".join(words(256, 2, 5)),)
        ).fetchone()[0]
        assert status in ("answered", "abstained")


def test_repeated_terms_count_once_and_rank_as_before(pg, adb):
    """A query of more than 256 terms is reduced to its distinct items: one word 600 times is that word (it
    cost 1.3 s of ts_rank_cd before), and a long passage with repeats keeps every match and every rank, under
    ts_rank_cd and ts_rank, for every chunk; a query of up to 256 terms is the one it always was."""
    with connect(pg, adb, R["writer"]) as w:
        assert w.execute("SELECT rag._fts_query('english', repeat('vacuum ', 600))::text").fetchone()[0] == (
            "'vacuum'"
        )
        phrase = w.execute(
            "SELECT rag._fts_query('english', repeat('\"vacuum table\" ', 300))::text"
        ).fetchone()
        assert phrase[0] == "'vacuum' <-> 'tabl'"
        # a negated query keeps its AND: repeated conjuncts count once
        neg = w.execute("SELECT rag._fts_query('english', repeat('vacuum -table ', 300))::text").fetchone()
        assert neg[0] == "'vacuum' & !'tabl'"
        small = " ".join(words(250, 3, 5))
        assert w.execute(
            "SELECT rag._fts_query('english', %s) = replace(websearch_to_tsquery('english',"
            " %s)::text, ' & ', ' | ')"
            "::tsquery",
            (small, small),
        ).fetchone() == (True,)
    with pg.admin(adb) as a:
        a.execute("SELECT * FROM rag.ingest('alpha', 'prose.md', %s)", ("# Memory\n\n" + PROSE * 3,))
        text = (PROSE * 10)[:4000]
        old, new = a.execute(
            "SELECT numnode(replace(websearch_to_tsquery('english', %s)::text, ' & ', ' | ')::tsquery),"
            " numnode(rag._fts_query('english', %s))",
            (text, text),
        ).fetchone()
        assert old > 511 and new < old  # reduced, not refused
        diff = a.execute(
            "WITH q AS (SELECT replace(websearch_to_tsquery('english', %s)::text, ' & ', ' |"
            " ')::tsquery AS o,"
            " rag._fts_query('english', %s) AS n)"
            " SELECT count(*), count(*) FILTER (WHERE (v.tsv @@ o) <> (v.tsv @@ n)"
            " OR ts_rank_cd(v.tsv, o, 1) <> ts_rank_cd(v.tsv, n, 1) OR ts_rank(v.tsv, o) <>"
            " ts_rank(v.tsv, n))"
            " FROM q, rag.chunk_tsv AS v",
            (text, text),
        ).fetchone()
        assert diff[0] > 0 and diff[1] == 0, diff
    with connect(pg, adb, R["reader"]) as c:
        got = c.execute("SELECT status FROM rag.ask(%s, 'alpha')", (text,)).fetchone()[0]
        assert got in ("answered", "abstained")


# ---------------------------------------------------------------- 2. retiring many new words
def test_retiring_a_document_of_many_new_words_is_linear(pg, adb):
    """A writer stores documents of 1,000, 2,000 and 4,000 chunks of new words (7,000 chunks, ~150,000 new
    lexemes: a young database), autovacuum analyzes, and the writer deletes the first. The retirement trigger
    deleted the lexemes whose count fell to zero with a join planned from statistics where no count is zero:
    a nested loop over every zeroed row and every key (242 million comparisons, 182 s; 57014 here, at the
    tenant_lexeme DELETE). Now by key: a few seconds, and the counts are what a rebuild from the live chunks
    makes."""
    with connect(pg, adb, R["writer"]) as w:
        for n, seed in ((1000, 10), (2000, 11), (4000, 12)):
            ws = words(20 * n + 2 * n, seed)
            chunks = [
                {
                    "content": " ".join(ws[i * 22 : i * 22 + 20]),
                    "embedding": EMB,
                    "title": " ".join(ws[i * 22 + 20 : i * 22 + 22]),
                }
                for i in range(n)
            ]
            w.execute(
                "SELECT count(*) FROM rag.store_document('alpha', %s, %s)",
                (f"many{n}.txt", json.dumps(chunks)),
            )
        with pg.admin(adb) as a:  # what autovacuum does within a minute of such growth
            a.execute("ANALYZE rag.tenant_lexeme, rag.tenant_title")
        # the plan the statistics chose there, which the writer may also choose for its own session (planner
        # switches are the caller's: security round 7)
        for switch in ("hashjoin", "mergejoin", "memoize", "indexscan", "bitmapscan"):
            w.execute(f"SET enable_{switch} = off")
        w.execute("SET statement_timeout = '30s'")
        w.execute("SELECT * FROM rag.delete_document('alpha', 'many1000.txt')")
        w.execute("SELECT * FROM rag.delete_document('alpha', 'many2000.txt')")
        w.execute("RESET ALL")
    with pg.admin(adb) as a:
        lex = a.execute(
            "SELECT count(*) FROM ((SELECT tenant, lexeme, live_chunks FROM rag.tenant_lexeme"
            " EXCEPT SELECT c.tenant, x.lexeme, count(*) FROM rag.chunk AS c CROSS JOIN LATERAL"
            " unnest(c.tsv) AS x"
            " WHERE c.retired_at IS NULL GROUP BY 1, 2) UNION ALL (SELECT c.tenant, x.lexeme, count(*)"
            " FROM rag.chunk AS c CROSS JOIN LATERAL unnest(c.tsv) AS x WHERE c.retired_at IS NULL"
            " GROUP BY 1, 2"
            " EXCEPT SELECT tenant, lexeme, live_chunks FROM rag.tenant_lexeme)) AS d"
        ).fetchone()[0]
        titles = a.execute(
            "SELECT count(*) FROM ((SELECT tenant, title, live_chunks FROM rag.tenant_title EXCEPT"
            " SELECT tenant,"
            " title, count(*) FROM rag.chunk WHERE retired_at IS NULL AND title <> '' GROUP BY 1, 2)"
            " UNION ALL"
            " (SELECT tenant, title, count(*) FROM rag.chunk WHERE retired_at IS NULL AND title <>"
            " '' GROUP BY 1, 2"
            " EXCEPT SELECT tenant, title, live_chunks FROM rag.tenant_title)) AS d"
        ).fetchone()[0]
        assert (lex, titles) == (0, 0)
        assert a.execute("SELECT count(*) FROM rag.tenant_lexeme WHERE live_chunks <= 0").fetchone() == (0,)
    with connect(pg, adb, R["writer"]) as w:
        w.execute("SELECT * FROM rag.delete_document('alpha', 'many4000.txt')")


# ---------------------------------------------------------------- 2b. what a tenant's open transaction holds
SHARED_DOC = "# Shared words\n\n## Vacuum tuning\n\nThe zebrafish quokka index vacuums nightly.\n"


@pytest.mark.parametrize("how", ["idle", "aborted"])
def test_an_open_transaction_of_one_tenant_holds_up_nothing_of_another(pg, adb, how):
    """Alpha's writer ingests a document and deletes another (new words for rag.word, lexeme, title and
    count rows, its log head through an ask), then stays in its transaction, idle or after an error. Bravo's
    writer ingests the same text (the same words, lexemes and titles in the shared tables), asks, deletes it
    and verifies its log, each under lock_timeout 2 s: nothing waits on alpha's rows."""
    with connect(pg, adb, R["writer"]) as w:
        w.execute("SELECT * FROM rag.ingest('alpha', 'gone.md', '# Gone\n\nA page to delete.\n')")
    with connect(pg, adb, R["writer"]) as a_w, connect(pg, adb, R["bravo"]) as b:
        a_w.autocommit = False
        a_w.execute("SET LOCAL lock_timeout = 0")
        a_w.execute("SELECT * FROM rag.ingest('alpha', %s, %s)", (f"shared-{how}.md", SHARED_DOC))
        a_w.execute("SELECT * FROM rag.delete_document('alpha', 'gone.md')")
        a_w.execute("SELECT rag.ask('When does the zebrafish quokka index vacuum?', 'alpha')")
        if how == "aborted":
            with pytest.raises(psycopg.Error):
                a_w.execute("SELECT * FROM rag.ask('x', 'alpha', 0)")
        b.execute("SET lock_timeout = '2s'")
        b.execute("SELECT * FROM rag.ingest('bravo', %s, %s)", (f"shared-{how}.md", SHARED_DOC))
        got = b.execute("SELECT status FROM rag.ask('When does the zebrafish quokka index vacuum?', 'bravo')")
        assert got.fetchone()[0] in ("answered", "abstained")
        assert b.execute("SELECT * FROM rag.delete_document('bravo', %s)", (f"shared-{how}.md",)).fetchone()
        assert b.execute("SELECT ok FROM rag.verify_log('bravo')").fetchone() == (True,)
        a_w.rollback()


# ---------------------------------------------------------------- 3. the DBA's limits
RESOURCE_LIMITS = (
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
    "idle_session_timeout",
    "work_mem",
    "hash_mem_multiplier",
    "maintenance_work_mem",
    "temp_file_limit",
    "temp_buffers",
)


def test_no_function_sets_a_resource_limit_and_the_roles_limits_hold_inside(pg, adb):
    """A SECURITY DEFINER function with a SET clause for a timeout or a memory limit would replace the DBA's
    `ALTER ROLE ... SET` for its call: none has one (max_parallel_workers_per_gather is only ever set to 0,
    and pgvector's scan memory to its default). A role's statement_timeout set by the DBA cancels an embedding
    inside rag.embed_many (SECURITY DEFINER, run as pgcite_owner), and temp_file_limit is not the tenant's to
    raise (42501)."""
    with pg.admin(adb) as a:
        configs = [
            r[0]
            for r in a.execute(
                "SELECT unnest(proconfig) FROM pg_proc WHERE pronamespace = 'rag'::regnamespace"
            ).fetchall()
        ]
        assert configs, "no function pins anything: the catalog query is wrong"
        for setting in configs:
            name, _, value = setting.partition("=")
            assert name not in RESOURCE_LIMITS, setting
            if name == "max_parallel_workers_per_gather":
                assert value == "0", setting
            if name == "hnsw.scan_mem_multiplier":
                assert value == "1", setting
        a.execute(f"ALTER ROLE {R['reader']} SET statement_timeout = '200ms'")
    try:
        with connect(pg, adb, R["reader"]) as c:
            assert c.execute("SHOW statement_timeout").fetchone() == ("200ms",)
            state = fails(
                c, "SELECT count(*) FROM rag.embed_many(array_fill(repeat('word ', 800), ARRAY[400]))"
            )
            assert state == "57014"
            assert fails(c, "SET temp_file_limit = '-1'") == "42501"
    finally:
        with pg.admin(adb) as a:
            a.execute(f"ALTER ROLE {R['reader']} RESET statement_timeout")
