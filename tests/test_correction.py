"""Spelling correction and real words (issue #11, round 6b): a question word the tenant's corpus lacks is a
typo candidate unless it is an ordinary English word or a form of one (one suffix or one prefix off; two
words joined do not count, typos split so too), which is left as typed and counts for the gate as a word the
passages lack; a typo of a corpus word is still corrected. Asked as a tenant reader on the PL/Python path; the
core path (no vocabulary) corrects every word the corpus lacks, as before."""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import connect, create_database, drop_database, reader_database

TENANT = "crates"
READER = f"corr_reader_{uuid.uuid4().hex[:8]}"

# A made-up domain. The corpus has "gunzip", "name", "reside", "restore", "single", but not "unzip", "rename",
# "resize", each of those one or two edits from a corpus word.
DOC = """# Storing widgets

Widgets reside on the frobnicator tray until they are shipped. Each widget has a name painted on its side.

# Shipping widgets

The frobnicator packs a widget into a crate; past a threshold of ten widgets it takes a second crate. \
A crate is unpacked with gunzip. To restore a widget, open its \
crate and put the widget back on the tray.

# Single widgets

A single widget can be ordered too; it is shipped without a crate.
"""

BOTH = "How do I unzip and restor a widgit?"


@pytest.fixture(scope="module")
def corr_db(pg):
    yield from reader_database(pg, "pgcite_correction", TENANT, READER, "crates.md", DOC)


def corrected(conn, question, tenant=TENANT):
    return conn.execute("SELECT rag.correct_question(%s, %s)", (question, tenant)).fetchone()[0]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # one prefix off a whole word (re-, un- before a 3-letter word): not "name", "reside", "gunzip"
        ("Can I rename a widget?", "can i rename a widget"),
        ("Can a widget resize itself?", "can a widget resize itself"),
        ("How do I unzip a widget?", "how do i unzip a widget"),
        # one suffix off ("shipper" is no corpus word; "shipped" is one edit away)
        ("Who is the shipper of a widget?", "who is the shipper of a widget"),
        # typos of corpus words, even those that split into two 3-letter words ("sin" + "gel", "res" + "tor")
        ("How do I restor a widgit from the frobnicatr?", "how do i restore a widget from the frobnicator"),
        ("Can a singel widget be shipped?", "can a single widget be shipped"),
        # a typo that splits into two vocabulary words ("tres" + "hold") is still a typo
        ("What is the treshold of a crate?", "what is the threshold of a crate"),
    ],
)
def test_real_words_stay_typos_are_corrected(pg, corr_db, question, expected):
    with connect(pg, corr_db, READER) as r:
        assert corrected(r, question) == expected


def test_evidence_shows_a_real_word_kept_and_a_typo_corrected(pg, corr_db):
    """One question with both: the gate judges "unzip" as typed, a word the passages lack (coverage: not
    found, not generic), and no foreign name (a form of "zip"); "restor" and "widgit" read as corpus words."""
    with connect(pg, corr_db, READER) as r:
        row = r.execute("SELECT status, evidence FROM rag.ask(%s, %s, 5)", (BOTH, TENANT)).fetchone()
    gate = row[1]["gate"]
    assert gate["corrected_question"] == "how do i unzip and restore a widget"
    words = {w["word"]: w for w in gate["words"]}
    assert words["unzip"]["found"] is False and words["unzip"]["generic"] is False
    assert words["restor"]["found"] is True  # the lexeme of "restore"
    assert "gunzip" not in words
    assert gate["foreign"] == []
    # the same question with the corpus's own word covers every word
    with connect(pg, corr_db, READER) as r:
        plain = r.execute(
            "SELECT evidence FROM rag.ask(%s, %s, 5)", ("How do I gunzip and restore a widget?", TENANT)
        ).fetchone()[0]["gate"]
    assert plain["signals"]["coverage"] > gate["signals"]["coverage"]


def test_word_forms_take_un_re_de_before_three_letters(pg, corr_db):
    with pg.admin(corr_db) as c:
        forms = c.execute("SELECT rag._word_forms(ARRAY['unzip', 'rerun', 'redis', 'inzip'])").fetchone()[0]
    assert ["zip"] in forms["unzip"] and ["run"] in forms["rerun"] and ["dis"] in forms["redis"]
    # only un-, re-, de- before three letters ("in" + "zip" is no form)
    assert ["zip"] not in forms["inzip"]


def test_core_path_corrects_every_word_the_corpus_lacks(pg):
    """Without pgcite_python there is no vocabulary to tell a real word from a typo: "unzip" is corrected to
    the corpus's "gunzip" (documented), typos as on the PL/Python path."""
    name = "pgcite_correction_core"
    reader = f"corr_core_{uuid.uuid4().hex[:8]}"
    drop_database(pg, name)
    create_database(pg, name, python=False)
    e = [1.0] + [0.0] * 383
    items = [
        {"content": s.split("\n", 1)[1].strip(), "embedding": e, "title": s.split("\n", 1)[0].lstrip("# ")}
        for s in DOC.split("\n# ")
    ]
    try:
        with pg.admin(name) as c:
            c.execute(f"CREATE ROLE {reader} LOGIN IN ROLE pgcite_reader")
            c.execute("SELECT rag.create_tenant('c')")
            c.execute("SELECT rag.grant_tenant('c', %s)", (reader,))
            c.execute("SELECT * FROM rag.store_document('c', 'crates.md', %s)", (json.dumps(items),))
        with connect(pg, name, reader) as r:
            assert corrected(r, BOTH, "c") == "how do i gunzip and restore a widget"
            assert corrected(r, "Can I rename a widget?", "c") == "can i name a widget"
    finally:
        drop_database(pg, name)
        with pg.admin() as a:
            a.execute(f"DROP ROLE IF EXISTS {reader}")


def test_each_question_word_is_one_probe_of_the_tenants_terms(pg, corr_db):
    """rag._correct_question and rag._foreign_names look each question word up in the tenant's terms (and its
    lexemes) with one probe of the primary key: without statistics on those columns (010-security.sql) the
    NOT EXISTS they had read every term of the tenant once per word (issue #10, session 15). Counted in the
    index entries the transaction read (pg_stat_get_xact_tuples_returned)."""
    question = "Where does a widget reside?"

    def reads(c, index):
        return c.execute(
            "SELECT pg_stat_get_xact_tuples_returned(%s::regclass)", (f"rag.{index}",)
        ).fetchone()[0]

    with pg.admin(corr_db) as c:
        terms, lexemes = c.execute(
            "SELECT (SELECT count(*) FROM rag.term WHERE tenant = %s),"
            " (SELECT count(*) FROM rag.tenant_lexeme WHERE tenant = %s)",
            (TENANT, TENANT),
        ).fetchone()
        # the words the two functions look up: of 4 to 40 characters (correction), of 3 to 40 letters (names)
        words = len(question.split())
        assert terms > 3 * words and lexemes > 3 * words, (terms, lexemes)
        with c.transaction():
            before = reads(c, "term_pkey")
            fixed = c.execute(
                "SELECT rag._correct_question(%s, %s, rag._params())", (TENANT, question)
            ).fetchone()[0]
            corrected_reads = reads(c, "term_pkey") - before
        assert fixed == "where does a widget reside"
        assert corrected_reads <= words
        with c.transaction():
            before = reads(c, "term_pkey"), reads(c, "tenant_lexeme_pkey")
            names = c.execute(
                "SELECT rag._foreign_names(%s, 'english', %s, %s)", (TENANT, question, fixed)
            ).fetchone()[0]
            after = reads(c, "term_pkey"), reads(c, "tenant_lexeme_pkey")
        assert names == []
        assert after[0] - before[0] <= words and after[1] - before[1] <= words, (before, after)
