"""Security review of session 21: rag.tenant_title.trgm (migration 017, each stripped title's show_trgm, kept
by the statement trigger rag._chunk_stats and rag._rebuild_retrieval_stats) and the title leg of
rag._candidates, which computes word_similarity only for titles whose share of trigrams found in the question
reaches min_title_similarity less a millionth, attacked as tenant roles and checked against the unbounded leg.

1. No tenant role reads rag.tenant_title (no grant, row level security without a policy): the trigrams of
   another tenant's titles are out of reach as its titles are.
2. A writer's hostile titles (2,400 random characters, the most bytes a title may have: about 2,000
   trigrams; CJK, whose trigrams show_trgm prints as 0x...; emoji, zero-width, control characters; whitespace
   or a section number alone, so no trigram; case variants; the question repeated to 2,400 characters) are
   stored with their trigrams, at most one per character and one more; the tenant's own title leg stays what
   the unbounded leg gives, in well under a second, and the other tenant's retrieval does not change.
3. The bound drops no title the unbounded leg keeps, for every cut-off equal to a title's score: among them a
   title whose score is its share of trigrams rounded up to the cut-off (5/9 -> 0.555556; without the
   millionth that title was dropped), titles differing only in case, multibyte and trigram-less titles.
4. An update from 0.8.0 with titles stored (ALTER EXTENSION pgcite UPDATE, and `pgcite install` of a managed
   database) gives every stored title its trigrams; the triggers keep them afterwards and
   rag._rebuild_retrieval_stats recomputes the same table."""

from __future__ import annotations

import json
import random
import time
import uuid

import psycopg
import pytest
from conftest import connect, fails, managed_from, two_tenant_database, updated_from
from test_retrieval_index import title_leg_reference, title_leg_rows

SFX = uuid.uuid4().hex[:6]
R = {k: f"s21_{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
E = [0.05] * 384
QUESTION = "How are checkpoint writes spread over the checkpoint interval when tuning wal segments?"
# titles of every kind the title leg meets, two chunks each (section numbers, case variants, multibyte, none)
TITLES = [
    "Ab cd ef",  # 5 of its 9 trigrams in one run of the question: 5/9, rounded up to 0.555556
    "AB CD EF",
    "Ab cd",
    "ab cdq",
    "Checkpoint writes",
    "CHECKPOINT WRITES",
    "checkpoint wRiTeS",
    "23.1. Checkpoint tuning",
    "F.35.2 Wal segments",
    "日本語 checkpoint",
    "ÜBER wal",
    "über WAL segments spread",
    "Straße ẞTRASSE checkpoint",
    "Checkpoint \U0001f600 \u200b writes",
    "   ",
    "4.2. ",
    "Spread",
    "Interval tuning of checkpoint writes spread",
]
SWEEP_Q = "How do ab cdq settings spread checkpoint writes for 日本語 ÜBER wal segments when tuning?"
ROWS = (
    "SELECT tenant, title, stripped, tsv::text, trgm::text, live_chunks FROM rag.tenant_title ORDER BY 1, 2"
)


@pytest.fixture(scope="module")
def sdb(pg):
    yield from two_tenant_database(pg, f"pgcite_s21sec_{SFX}", R)


def _items(titles, tag: str = "") -> str:
    return json.dumps(
        [{"content": f"Part {i}{tag} on {t[:40]}.", "embedding": E, "title": t} for i, t in enumerate(titles)]
    )


def _leg(c, tenant: str, question: str) -> list:
    """The title leg's rows of rag._candidates (as rag._answer calls it) and those of the unbounded leg."""
    return [title_leg_rows(c, tenant, question, json.dumps(E)), title_leg_reference(c, tenant, question)]


def _trigrams_right(c, tenant: str) -> tuple:
    """(titles, titles whose trgm is show_trgm(stripped)) of the tenant."""
    return c.execute(
        "SELECT count(*), count(*) FILTER (WHERE trgm = show_trgm(stripped)) FROM rag.tenant_title "
        "WHERE tenant = %s",
        (tenant,),
    ).fetchone()


# ---------------------------------------------------------------- 1. nobody but pgcite_owner reads trgm
def test_no_tenant_role_reads_title_trigrams(pg, sdb):
    with pg.admin(sdb) as a:
        # what is protected: bravo's title and its trigrams
        assert a.execute(
            "SELECT trgm = show_trgm('Bravo secrets') FROM rag.tenant_title WHERE tenant = 'bravo'"
        ).fetchall() == [(True,)]
        roles = ["public", "pgcite_reader", "pgcite_writer", "pgcite_admin", *R.values()]
        privileged = a.execute(
            "SELECT r FROM unnest(%s::text[]) AS r WHERE has_column_privilege(r, 'rag.tenant_title', "
            "'trgm', 'SELECT') OR has_any_column_privilege(r, 'rag.tenant_title', 'SELECT, INSERT, UPDATE')",
            (roles,),
        ).fetchall()
        assert privileged == []
    for role in R:
        with connect(pg, sdb, R[role]) as c:
            for sql in (
                "SELECT trgm FROM rag.tenant_title WHERE tenant = 'bravo'",
                "SELECT count(*) FROM rag.tenant_title WHERE 'sec' = ANY (trgm)",
                "UPDATE rag.tenant_title SET trgm = '{}'",
            ):
                assert fails(c, sql) == "42501", (role, sql)


# ---------------------------------------------------------------- 2. a writer's hostile titles
def _hostile_titles() -> list[str]:
    rnd = random.Random(21)
    alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
    out = []
    for i in range(12):
        # random words: ~2,000 distinct trigrams (a title may have 2,400 bytes: it is a B-tree index key)
        words = " ".join("".join(rnd.choices(alnum, k=rnd.randint(2, 8))) for _ in range(600))
        out.append(f"Checkpoint {i} {words}"[:2400])
        out.append(f"Checkpoint {i} " + "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(790)))
    out += [
        "Checkpoint \u200b\u00a0\u0301 \U0001f600\U0001f600 ẞtraße İstanbul \x01\x7f tab\there",
        "   ",
        "\t\n",
        "23.1. ",
        "CHECKPOINT TUNING",
        "checkpoint tuning",
        "Checkpoint Tuning",
        ((QUESTION + " ") * 50)[:2400],
    ]
    return out


def test_hostile_titles_are_stored_with_bounded_trigrams_and_change_no_other_tenant(pg, sdb):
    retrieve = "SELECT chunk_id, distance, trgm_score, fts_score FROM rag.retrieve(%s, %s, 8)"
    bravo_q = "What is the launch code of tenant bravo? " + QUESTION
    with connect(pg, sdb, R["bravo"]) as c:
        before = c.execute(retrieve, (bravo_q, "bravo")).fetchall()
    titles = _hostile_titles()
    with connect(pg, sdb, R["writer"]) as c:
        start = time.monotonic()
        c.execute("SELECT * FROM rag.store_document('alpha', 'hostile.md', %s::jsonb)", (_items(titles),))
        assert time.monotonic() - start < 20
    with pg.admin(sdb) as a:
        assert _trigrams_right(a, "alpha") == (len(set(titles)) + 2,) * 2  # and alpha's own two
        # at most one trigram a character (and one more), whatever the characters: 0x... for multibyte ones
        over, big, empty, hexed = a.execute(
            "SELECT max(cardinality(trgm) - length(stripped)), max(cardinality(trgm)), "
            "count(*) FILTER (WHERE cardinality(trgm) = 0), "
            "count(*) FILTER (WHERE EXISTS (SELECT FROM unnest(trgm) AS g WHERE g ~ '^0x[0-9a-f]{6}$')) "
            "FROM rag.tenant_title WHERE tenant = 'alpha'"
        ).fetchone()
        assert over <= 1 and big > 1900 and empty == 3 and hexed == 13, (over, big, empty, hexed)
        # alpha's own title leg: the unbounded leg's rows, for questions on both sides of the bound
        for q in (QUESTION, "Checkpoint tuning", titles[0][:300], titles[1][:200]):
            got, want = _leg(a, "alpha", q)
            assert got == want and got, q
    with connect(pg, sdb, R["reader"]) as c:
        c.execute("SET statement_timeout = '20s'")
        for q in (QUESTION, titles[1][:400] + " \x01 \U0001f600?", titles[-1][:3900]):
            start = time.monotonic()
            assert c.execute(retrieve, (q, "alpha")).fetchall()
            assert time.monotonic() - start < 2, q[:40]
    with connect(pg, sdb, R["bravo"]) as c:
        assert c.execute(retrieve, (bravo_q, "bravo")).fetchall() == before


# ---------------------------------------------------------------- 3. every cut-off a title scores
def test_the_bound_drops_no_title_at_any_cut_off_a_title_scores(pg, sdb):
    with pg.admin(sdb) as a:
        a.execute("SELECT rag.create_tenant('sweep')")
        a.execute("SELECT * FROM rag.store_document('sweep', 's.md', %s::jsonb)", (_items(TITLES * 2),))
    with psycopg.connect(pg.dsn(sdb)) as c:  # a transaction: rag.set_config rolled back
        tq = c.execute(
            "SELECT rag._title_question(rag._correct_question('sweep', %s, rag._params()))", (SWEEP_Q,)
        ).fetchone()[0]
        scores = c.execute(
            "SELECT title, round(word_similarity(stripped, %(q)s)::numeric, 6)::float8, "
            "(length(array_to_tsvector(show_trgm(%(q)s))) "
            "- length(ts_delete(array_to_tsvector(show_trgm(%(q)s)), trgm)))::float8 / cardinality(trgm) "
            "FROM rag.tenant_title WHERE tenant = 'sweep' AND cardinality(trgm) > 0",
            {"q": tq},
        ).fetchall()
        by_title = {t: (s, share) for t, s, share in scores}
        # the title whose score is its share rounded up, and the case variants scoring alike
        assert by_title["Ab cd ef"] == (0.555556, 5 / 9) and by_title["AB CD EF"] == by_title["Ab cd ef"]
        assert by_title["Checkpoint writes"] == by_title["CHECKPOINT WRITES"] == (1.0, 1.0)
        assert all(s <= share + 1e-6 for s, share in by_title.values())
        cuts = sorted({0.0, 1.0} | {s for s, _ in by_title.values()})
        for cut in cuts:
            c.execute("SELECT rag.set_config('min_title_similarity', %s)", (str(cut),))
            got, want = _leg(c, "sweep", SWEEP_Q)
            assert got == want, cut
            if cut == 0.555556:
                kept = c.execute(
                    "SELECT count(*) FROM rag.chunk WHERE tenant = 'sweep' AND title = 'Ab cd ef' "
                    "AND chunk_id = ANY (%s)",
                    ([r[0] for r in got],),
                ).fetchone()[0]
                assert kept == 2
        c.rollback()


# ---------------------------------------------------------------- 4. the update from 0.8.0
def _store_old(c) -> None:
    """Titles stored under 0.8.0: one document, then a second version retiring half of them."""
    c.execute("SELECT rag.create_tenant('old')")
    c.execute("SELECT * FROM rag.store_document('old', 'a.md', %s::jsonb)", (_items(TITLES[:10]),))
    c.execute("SELECT * FROM rag.store_document('old', 'b.md', %s::jsonb)", (_items(TITLES),))
    c.execute("SELECT * FROM rag.store_document('old', 'b.md', %s::jsonb)", (_items(TITLES[::2], "v2"),))


def _check_updated(c) -> None:
    n = len(set(TITLES[:10]) | set(TITLES[::2]))
    assert n < len(TITLES) and _trigrams_right(c, "old") == (n, n)
    # the triggers keep them (a new title; b.md's own titles retired), and a rebuild recomputes the same table
    c.execute("SELECT * FROM rag.store_document('old', 'b.md', %s::jsonb)", (_items(["Νέος τίτλος"], "v3"),))
    assert _trigrams_right(c, "old") == (11, 11)
    rows = c.execute(ROWS).fetchall()
    c.execute("SELECT rag._rebuild_retrieval_stats()")
    assert c.execute(ROWS).fetchall() == rows
    got, want = _leg(c, "old", SWEEP_Q)
    assert got == want and got


def test_an_update_from_0_8_0_gives_stored_titles_their_trigrams(pg):
    with updated_from(pg, f"pgcite_s21upd_{SFX}", before_update=_store_old) as c:
        _check_updated(c)


def test_pgcite_install_from_0_8_0_gives_stored_titles_their_trigrams(pg):
    with managed_from(pg, before_update=_store_old) as m, m.admin() as c:
        _check_updated(c)
