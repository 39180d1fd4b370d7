"""The gate's foreign names (issue #11, round 5): a question word the tenant's corpus never uses, that
spelling correction does not correct and that is no common English word nor a form of one ("nginx", "EBS")
counts like a name the passages lack. Asked as a tenant reader, on the PL/Python path and on the core path
(no vocabulary: the signal is off)."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from conftest import connect, create_database, drop_database, reader_database

TENANT = "paint"
READER = f"gate_reader_{uuid.uuid4().hex[:8]}"

# A made-up domain, so that the model knows nothing about it beforehand.
DOC = """# Repainting widgets

To repaint a widget, put it on the frobnicator tray and choose a colour with the dial. The frobnicator \
strips the old paint first and sprays two coats of the new colour.

# Widget colours

Widgets come in eight colours. Red is the most common colour and ochre the rarest.

# Sealing widgets

A sealed widget can never be repainted. The frobnicator seals a widget when it is exported to a crate.
"""

# the same question with a foreign name, with a typo of a corpus word, with common words the corpus lacks
FOREIGN = "How do I repaint a widget with quorvex?"
PLAIN = "How do I repaint a widget?"
TYPO = "How do I repaint a widgit?"
COMMON = "Can a sealed widget be repainted halfway?"


@pytest.fixture(scope="module")
def gate_db(pg):
    yield from reader_database(pg, "pgcite_gate", TENANT, READER, "paint.md", DOC)


def ask(conn, question, tenant=TENANT, query_embedding=None):
    cur = conn.execute(
        "SELECT status, reason, evidence FROM rag.ask(%s, %s, 5, %s)", (question, tenant, query_embedding)
    )
    return dict(zip(("status", "reason", "evidence"), cur.fetchone(), strict=True))


def test_foreign_name_lowers_the_score_and_abstains(pg, gate_db):
    """ "quorvex" is in no chunk, no typo of a corpus word and no English word: a name the passages lack
    (names 0, the score times 0.25 ** 0.25), and the question abstains with the documented reason."""
    with connect(pg, gate_db, READER) as r:
        plain = ask(r, PLAIN)
        foreign = ask(r, FOREIGN)
    assert plain["status"] == "answered", plain["evidence"]["gate"]
    assert plain["evidence"]["gate"]["foreign"] == []
    assert plain["evidence"]["gate"]["signals"]["names"] is None
    g = foreign["evidence"]["gate"]
    assert g["foreign"] == ["quorvex"]
    assert g["signals"]["names"] == 0
    assert g["corrected_question"] == "how do i repaint a widget with quorvex"  # left as it is
    assert (foreign["status"], foreign["reason"]) == ("abstained", "no_relevant_sources")
    assert g["failed"] == ["score"]
    assert g["signals"]["score"] < plain["evidence"]["gate"]["signals"]["score"]


def test_typo_of_a_corpus_word_is_no_foreign_name(pg, gate_db):
    with connect(pg, gate_db, READER) as r:
        a = ask(r, TYPO)
    assert a["evidence"]["gate"]["corrected_question"] == "how do i repaint a widget"
    assert a["evidence"]["gate"]["foreign"] == []
    assert a["status"] == "answered", a["evidence"]["gate"]


def test_common_words_the_corpus_lacks_are_no_foreign_names(pg, gate_db):
    """ "halfway" is a whole word of the vocabulary that the corpus never uses: no foreign name, and the
    question is answered."""
    with connect(pg, gate_db, READER) as r:
        a = ask(r, COMMON)
    assert a["evidence"]["gate"]["foreign"] == []
    assert a["evidence"]["gate"]["signals"]["names"] is None
    assert a["status"] == "answered", a["evidence"]["gate"]


def test_foreign_names_and_word_forms(pg, gate_db):
    """rag._foreign_names reads the tenant's words and the vocabulary; the user's own objects are left out."""
    with pg.admin(gate_db) as c:
        q = "SELECT rag._foreign_names(%s, 'english', %s, rag._correct_question(%s, %s, rag._params()))"

        def foreign(text):
            return c.execute(q, (TENANT, text, TENANT, text)).fetchone()[0]

        assert foreign("How do I rotate the logs of nginx on an AWS EBS volume?") == ["nginx", "aws", "ebs"]
        # corpus words in other forms (the lexeme "colour", "seal"), forms of English words, two words joined
        assert (
            foreign("Which colours are sealed, refreshed, disconnected, unreachable or have drawbacks?") == []
        )
        # the user's own objects
        assert foreign("Why is my quorvex slow, and the quorvex table too?") == []
        # letters only, at least three: snake_case names and short tokens are the other signals' concern
        assert foreign("Does qx_vex or qx work?") == []
        forms = c.execute("SELECT rag._word_forms(ARRAY['drawbacks', 'stopped'])").fetchone()[0]
        # bounded for every caller: the question's length (54000), the words looked into
        with pytest.raises(psycopg.errors.ProgramLimitExceeded):
            c.execute("SELECT rag._foreign_names(%s, 'english', %s, '')", (TENANT, "quorvex " * 501))
        many = c.execute(
            "SELECT rag._word_forms(array_fill('quorvex'::text, ARRAY[100000]) || 'drawbacks'::text)"
        )
        assert list(many.fetchone()[0]) == ["quorvex"]
    assert ["draw", "backs"] in forms["drawbacks"] and ["drawback"] in forms["drawbacks"]
    assert ["stop"] in forms["stopped"]


def test_core_path_has_no_vocabulary_and_no_foreign_names(pg):
    """Without pgcite_python there is no vocabulary to tell a name from an English word the corpus lacks: the
    signal is off (documented), so the same question keeps names null."""
    name = "pgcite_gate_core"
    drop_database(pg, name)
    create_database(pg, name, python=False)
    e = [1.0] + [0.0] * 383
    items = [
        {"content": s.split("\n", 1)[1].strip(), "embedding": e, "title": s.split("\n", 1)[0].lstrip("# ")}
        for s in DOC.split("\n# ")
    ]
    try:
        with pg.admin(name) as c:
            c.execute("SELECT rag.create_tenant('p')")
            c.execute("SELECT * FROM rag.store_document('p', 'paint.md', %s)", (json.dumps(items),))
            a = ask(c, FOREIGN, tenant="p", query_embedding="[" + ",".join(map(str, e)) + "]")
            assert a["evidence"]["sentence_scoring"] == "lexical"
            assert a["evidence"]["gate"]["foreign"] == []
            assert a["evidence"]["gate"]["signals"]["names"] is None
            assert (
                c.execute(
                    "SELECT rag._foreign_names('p', 'english', %s, %s)", (FOREIGN, FOREIGN.lower())
                ).fetchone()[0]
                == []
            )
    finally:
        drop_database(pg, name)


def test_foreign_names_need_no_rights_the_reader_lacks(pg, gate_db):
    """The reader cannot call the vocabulary itself (rag._common_words is pgcite_owner's), nor the gate's
    foreign names and word forms that read it: only rag.ask uses them, inside its SECURITY DEFINER entry
    point."""
    for call in (
        "SELECT rag._common_words(ARRAY['quorvex'])",
        f"SELECT rag._foreign_names('{TENANT}', 'english', 'quorvex', 'quorvex')",
        "SELECT rag._word_forms(ARRAY['drawbacks'])",
    ):
        with connect(pg, gate_db, READER) as r, pytest.raises(psycopg.errors.InsufficientPrivilege):
            r.execute(call)


# --- The calibration rule (issue #11, round 6): rag._calibration_threshold, the lowest expected cost with
# each class's scores blurred by a kernel of Silverman's bandwidth.


def spread(lo, hi, n):
    return [round(lo + (hi - lo) * i / (n - 1), 6) for i in range(n)]


def threshold(c, answerable, unanswerable, cost=2.0):
    return c.execute(
        "SELECT rag._calibration_threshold(%s::float8[], %s::float8[], %s)", (answerable, unanswerable, cost)
    ).fetchone()[0]


def test_one_moved_negative_does_not_move_the_threshold_across_the_gap(pg, gate_db):
    """A constructed score set: 100 answerable scores from 0.50 to 0.85, 200 negatives from 0.10 to 0.42, and
    one hard negative at 0.47 in the gap. The midpoint of the gap (the rule before 0.7.0) is 0.485 with it and
    0.46 when that one negative drops to 0.30: one question moved the threshold by 0.025. The smoothed rule
    moves by a small fraction of that and keeps every answerable question."""
    pos = spread(0.50, 0.85, 100)
    base = spread(0.10, 0.42, 200)
    with pg.admin(gate_db) as c:
        high = threshold(c, pos, [*base, 0.47])
        low = threshold(c, pos, [*base, 0.30])
    assert high["rule"] == "smoothed_cost"
    for t in (high, low):
        # in the gap: no answerable question lost, no negative answered
        assert 0.42 < t["min_score"] <= 0.50, t
    assert abs(high["min_score"] - low["min_score"]) < 0.25 * 0.025, (high, low)
    # what it chose it reports: the bandwidths (Silverman: of the order of 0.9 * sd * n ** -0.2) and the
    # expected errors at the threshold
    assert 0.01 < high["bandwidth"]["used"] < 0.1
    assert high["expected_false_abstain"] >= 0 and high["expected_false_answer"] >= 0


def test_calibration_threshold_follows_the_scores_and_the_cost(pg, gate_db):
    """Scores shifted by 0.1 shift the threshold by 0.1 (it reads the scores, no constant); a dearer wrong
    answer raises it; overlapping classes of equal spread and equal cost meet halfway."""
    pos = spread(0.45, 0.85, 81)
    neg = spread(0.15, 0.55, 81)
    with pg.admin(gate_db) as c:
        t1 = threshold(c, pos, neg, 1.0)["min_score"]
        shifted = threshold(c, [x + 0.1 for x in pos], [x + 0.1 for x in neg], 1.0)["min_score"]
        t2 = threshold(c, pos, neg, 2.0)["min_score"]
        t4 = threshold(c, pos, neg, 4.0)["min_score"]
        # as many negatives as answerable questions or more: every negative labelled twice leaves the
        # threshold where it was (together they weigh false_answer_cost times the answerable questions)
        doubled = threshold(c, pos, neg + neg, 1.0)["min_score"]
        # scores no question can pass with are left out; a class without a score gives no threshold
        with_nan = threshold(c, pos + [None], neg + [float("nan")], 1.0)["min_score"]
        empty = threshold(c, pos, [None], 1.0)
    assert t1 == pytest.approx(0.50, abs=0.005)
    assert shifted == pytest.approx(t1 + 0.1, abs=0.002)
    assert t1 < t2 < t4
    assert with_nan == t1
    assert doubled == pytest.approx(t1, abs=0.002)
    assert empty is None


def test_a_few_negatives_weigh_as_counts(pg, gate_db):
    """Fewer negatives than answerable questions: each wrong answer costs false_answer_cost wrong abstentions,
    so one hard negative among the answerable scores (0.55) is left answered rather than abstaining on the 14
    answerable questions below it (weighing the error rates instead, that one negative of five would have
    weighed 40 answerable questions)."""
    pos = spread(0.50, 0.85, 100)
    with pg.admin(gate_db) as c:
        t = threshold(c, pos, [0.10, 0.20, 0.30, 0.35, 0.55])
    assert 0.35 < t["min_score"] <= 0.50, t
