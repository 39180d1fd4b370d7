"""Quotes that carry the fact (issue #11): an introducing sentence quoted with its list, code block, table or
note; contiguous spans of two or three sentences; the gate's generic and bound words and proper names. Every
citation is checked verbatim at its offsets, on the PL/Python path and on the core's lexical path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest
from conftest import assert_verbatim, create_database, drop_database, vector_values

TENANT = "widgets"

# One section per shape, in a made-up domain so that the model knows nothing about it beforehand.
DOC = """# Widget store limits

The widget store is where the frobnicator keeps every widget it has painted.

The current limitations of the widget store are:

- A widget name must be shorter than 64 bytes
- No more than 8 colours can be mixed into one widget
- A store holds at most 10,000 sealed widgets

Other stores have different limits.

# Creating a widget index

Lookups by widget name read the whole store unless the store has an index.

To create a widget index, run this command in the frobnicator shell:

```
CREATE WIDGET INDEX widget_name_idx ON store (name);
```

The index is kept up to date by the frobnicator from then on.

# Repainting widgets

Repainting changes the colour of a widget that is already in the store.

Before you repaint the widgets of a busy store, read this:

> **Warning:** Repainting locks the whole store, so nobody can read a widget until it has finished.

Repainting a single widget is quick.

# Plain and sealed widgets

A store holds widgets of two kinds, plain widgets and sealed widgets. Sealed widgets can never be repainted, \
but they load ten times faster than plain ones. The frobnicator seals a widget when it is exported.

Widgets are counted in dozens by tradition.

# Operator classes

An operator class tells the frobnicator how to compare widgets. Each operator class belongs to an operator \
family. The default operator class compares names; another operator class compares colours. You choose the \
operator class when you create the widget index.

# History of the frobnicator

The first frobnicator was built in a small workshop and painted one widget a day.

# Colours

Widgets come in eight colours, and red is the most common of them.

# Shipping

A crate of widgets is shipped by rail, and a crate holds one gross of widgets.

# Licensing

The frobnicator may be used by anyone who keeps its copyright notice.
"""


@pytest.fixture(scope="module")
def widgets(pg, db):
    with psycopg.connect(pg.dsn(db), autocommit=True) as c:
        c.execute("SELECT rag.create_tenant(%s)", (TENANT,))
        c.execute("SELECT * FROM rag.ingest(%s, 'widgets.md', %s, 'markdown')", (TENANT, DOC))
    return TENANT


def ask(conn, question, tenant=TENANT, k=5, query_embedding=None):
    cur = conn.execute(
        "SELECT status, answer, citations, evidence FROM rag.ask(%s, %s, %s, %s)",
        (question, tenant, k, query_embedding),
    )
    return dict(zip(("status", "answer", "citations", "evidence"), cur.fetchone(), strict=True))


def function_calls(conn, *names: str) -> dict:
    """Calls of rag's functions so far in this transaction (track_functions = 'all'), by name."""
    return dict(
        conn.execute(
            "SELECT funcname, calls FROM pg_stat_xact_user_functions WHERE schemaname = 'rag'"
            " AND funcname = ANY(%s)",
            (list(names),),
        ).fetchall()
    )


def test_list_is_quoted_with_its_introduction(conn, widgets):
    a = ask(conn, "What are the limitations of the widget store?")
    assert_verbatim(conn, a)
    first = a["citations"][0]["quote"]
    assert first.startswith("The current limitations of the widget store are:")
    assert "- No more than 8 colours can be mixed into one widget" in first
    assert first.endswith("- A store holds at most 10,000 sealed widgets")  # the whole list, and no further


def test_code_block_is_quoted_with_its_introduction(conn, widgets):
    a = ask(conn, "How do I create a widget index?")
    assert_verbatim(conn, a)
    quotes = [c["quote"] for c in a["citations"]]
    unit = next(q for q in quotes if "CREATE WIDGET INDEX" in q)
    assert unit.startswith("To create a widget index, run this command in the frobnicator shell:")
    assert unit.rstrip().endswith("```")  # the fence is closed: the code block is whole


def test_note_is_quoted_with_its_introduction(conn, widgets):
    a = ask(conn, "What should I read before I repaint the widgets of a busy store?")
    assert_verbatim(conn, a)
    unit = a["citations"][0]["quote"]
    assert unit.startswith("Before you repaint the widgets of a busy store, read this:")
    assert "> **Warning:** Repainting locks the whole store" in unit


def test_contiguous_span_of_sentences(conn, widgets):
    a = ask(conn, "What is the difference between plain and sealed widgets?")
    assert_verbatim(conn, a)
    span = a["citations"][0]["quote"]
    # two neighbouring sentences that answer together, quoted as one span (never more than three)
    assert "plain widgets and sealed widgets." in span and "Sealed widgets can never be repainted" in span
    assert span.count(". ") <= 2


def test_bound_word_is_not_coverage(conn, widgets):
    """ "class" occurs only as "operator class" in the passages: it does not count as covered."""
    a = ask(conn, "What is a class?")
    words = {w["word"]: w for w in a["evidence"]["gate"]["words"]}
    assert words["class"]["found"] is True and words["class"]["bound"] is True
    assert a["evidence"]["gate"]["signals"]["coverage"] == 0.25  # (0 + 0.5) / (1 + 1)
    asked = ask(conn, "What does an operator class compare?")
    words = {w["word"]: w for w in asked["evidence"]["gate"]["words"]}
    assert words["class"]["bound"] is False  # the question names the whole term


def test_generic_words_do_not_count_as_coverage(conn, widgets):
    """A word in more than 15 % of the tenant's chunks says little: it neither adds to nor takes from
    coverage."""
    a = ask(conn, "What about the widgets?")
    words = {w["word"]: w for w in a["evidence"]["gate"]["words"]}
    assert words["widget"]["generic"] is True
    assert a["evidence"]["gate"]["signals"]["coverage"] == 0.5  # no specific word: (0 + 0.5) / (0 + 1)


def test_proper_names_the_passages_lack_lower_the_score(conn, widgets):
    a = ask(conn, "How do I create a widget index in MongoDB?")
    assert a["evidence"]["gate"]["signals"]["names"] == 0  # "MongoDB" is in no passage
    b = ask(conn, "How do I create a widget index?")
    assert b["evidence"]["gate"]["signals"]["names"] is None
    assert a["evidence"]["gate"]["signals"]["score"] < b["evidence"]["gate"]["signals"]["score"]


def test_question_forms_and_names(conn):
    f = conn.execute(
        "SELECT rag._question_features(%s)", ("How do I use pg_basebackup -D with \\dF and VACUUM FULL?",)
    ).fetchone()[0]
    assert f["howto"] is True and f["why"] is False
    assert f["names"] == ["pg_basebackup", "-D", "\\dF", "VACUUM", "FULL"]
    assert conn.execute("SELECT rag._question_features('What is a GiST index used for?')").fetchone()[0][
        "defines"
    ] == ["gist", "index"]
    names = conn.execute(
        "SELECT rag._proper_names(%s)",
        ("Is the SQL Server log like Perl? And HBase, VACUUM FULL in Python.",),
    ).fetchone()[0]
    assert names == ["SQL Server", "Perl", "HBase", "Python"]


def test_sql_spans_match_the_python_splitter(conn):
    text = (
        "Intro sentence here. Second one follows:\n\n- item one. More of it\n- item two\n\n"
        "```\nSELECT 1;\n```\n\n> **Note:** A note. Its second sentence.\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "1. First step.\n2. Second step."
    )
    sql = conn.execute("SELECT start_pos, end_pos FROM rag._text_spans(%s)", (text,)).fetchall()
    py = conn.execute("SELECT start_pos, end_pos FROM rag._sentence_spans(ARRAY[%s])", (text,)).fetchall()
    assert sql == py
    for s, e in sql:
        assert text[s:e] == text[s:e].strip() and text[s:e]


@pytest.fixture
def core_db(pg):
    """A database with the core extension only (no PL/Python), as on a managed PostgreSQL."""
    name = "pgcite_quotes_core"
    drop_database(pg, name)
    create_database(pg, name, python=False)
    try:
        yield name
    finally:
        drop_database(pg, name)


def test_lexical_path_quotes_the_same_shapes(pg, core_db):
    """Without PL/Python and without stored sentences, spans are split in SQL and scored by ts_rank; the list
    and the code block are still quoted with their introductions, offsets exact."""
    e = [1.0] + [0.0] * 383
    sections = DOC.split("\n# ")
    items = [
        {"content": s.split("\n", 1)[1].strip(), "embedding": e, "title": s.split("\n", 1)[0].lstrip("# ")}
        for s in sections
    ]
    q = "[" + ",".join(str(x) for x in e) + "]"
    with pg.admin(core_db) as c:
        c.execute("SELECT rag.create_tenant('w')")
        c.execute("SELECT * FROM rag.store_document('w', 'widgets.md', %s)", (json.dumps(items),))
        a = ask(c, "What are the limitations of the widget store?", tenant="w", query_embedding=q)
        assert a["evidence"]["sentence_scoring"] == "lexical"
        assert_verbatim(c, a)
        assert any(
            x["quote"].startswith("The current limitations of the widget store are:")
            and x["quote"].endswith("- A store holds at most 10,000 sealed widgets")
            for x in a["citations"]
        )
        b = ask(c, "How do I create a widget index in the frobnicator shell?", tenant="w", query_embedding=q)
        assert_verbatim(c, b)
        assert any(
            "CREATE WIDGET INDEX" in x["quote"] and x["quote"].startswith("To create") for x in b["citations"]
        )


# Quote choice on given span scores: which spans rag._choose_quotes takes from the passages, whatever the
# model would score (rag.ask passes it the MiniLM + lexical scores of rag._sentence_scores).
GADGETS = """# Gadget polish

Gadget polish keeps a gadget shiny for years. Polished gadgets are easier to sell.

# Polishing a gadget

To polish a gadget, run this command in the frobnicator shell:

```
POLISH GADGET gadget_name;
```

# Rust

Gadgets rust because the frobnicator keeps them in a damp cellar.

# Gadget colours

Gadgets come in three colours: red, green and blue.

# Dull gadgets

A gadget loses its shine in a damp cellar within a year. Owners might wish to keep the shine longer \
by lowering the humidity of the cellar.
"""


@pytest.fixture(scope="module")
def gadgets(pg, db):
    with psycopg.connect(pg.dsn(db), autocommit=True) as c:
        c.execute("SELECT rag.create_tenant('gadgets')")
        c.execute("SELECT * FROM rag.ingest('gadgets', 'gadgets.md', %s, 'markdown')", (GADGETS,))
    return "gadgets"


def choose(conn, question, scores, order, max_quotes=2, features_of=None):
    """rag._choose_quotes with rag.ask's defaults (margin 0.08, rank penalty 0.1) over the gadget sections
    in `order` (titles, best passage first), each stored sentence scored by the first prefix of `scores` it
    starts with (0.1 otherwise); with `features_of`, given the features of that question (rag._quote_features)
    instead of computing the question's. Every quote is the chunk's text at its offsets."""
    rows = conn.execute(
        "SELECT c.chunk_id, c.title, c.content, s.start_pos, s.end_pos FROM rag.chunk AS c "
        "JOIN rag.sentence AS s USING (chunk_id) WHERE c.tenant = 'gadgets' "
        "ORDER BY c.chunk_index, s.start_pos"
    ).fetchall()
    ids = {title: chunk_id for chunk_id, title, *_ in rows}
    content = {chunk_id: text for chunk_id, _, text, *_ in rows}
    scored = [
        {
            "chunk_id": chunk_id,
            "start": s,
            "end": e,
            "score": next((v for p, v in scores.items() if text[s:e].startswith(p)), 0.1),
        }
        for chunk_id, _, text, s, e in rows
    ]
    picked = conn.execute(
        "SELECT rag._choose_quotes(%s, %s, %s, %s, %s, 0.08, 0.1, "
        "CASE WHEN %s::text IS NOT NULL THEN rag._quote_features(%s, %s) END)",
        (question, question, [ids[t] for t in order], json.dumps(scored), max_quotes, *[features_of] * 3),
    ).fetchone()[0]
    for p in picked:
        assert content[p["chunk_id"]][p["start"] : p["end"]] == p["quote"]
    return [p["quote"] for p in picked]


def test_howto_answer_carries_what_to_do(conn, gadgets):
    """The passage closest to a "how do I" question only describes the thing; the answer still quotes the
    command from a lower passage (within 0.35 of the best), not a better-scored sentence that says no more."""
    order = ["Gadget polish", "Gadget colours", "Polishing a gadget", "Rust"]
    scores = {"Gadget polish keeps": 0.9, "Gadgets come in": 0.8, "To polish a gadget": 0.6}
    quotes = choose(conn, "How do I polish a gadget?", scores, order)
    assert quotes[0].startswith("Gadget polish keeps a gadget shiny")
    assert len(quotes) == 2 and quotes[1].startswith("To polish a gadget, run this command")
    assert "POLISH GADGET gadget_name;" in quotes[1]
    # bounded: a command far below the best is not quoted
    quotes = choose(conn, "How do I polish a gadget?", {**scores, "To polish a gadget": 0.3}, order)
    assert not any("POLISH GADGET" in q for q in quotes)


def test_quote_features_given_or_computed_choose_the_same(conn, gadgets):
    """rag._answer hands rag._choose_quotes the question's features (rag._quote_features), computed before
    retrieval while the embedding runs in the background: the quotes are those it chooses when it computes
    them itself, and the features it is given are the ones it reads (a "how do I" question's features make it
    carry the command; a plain question's, given for the same question, do not)."""
    order = ["Gadget polish", "Gadget colours", "Polishing a gadget", "Rust"]
    scores = {"Gadget polish keeps": 0.9, "Gadgets come in": 0.8, "To polish a gadget": 0.6}
    q = "How do I polish a gadget?"
    computed = choose(conn, q, scores, order)
    assert choose(conn, q, scores, order, features_of=q) == computed
    assert any("POLISH GADGET" in quote for quote in computed)
    other = choose(conn, q, scores, order, features_of="What is gadget polish?")
    assert not any("POLISH GADGET" in quote for quote in other)


def test_howto_answer_carries_advice_in_the_third_person(conn, gadgets):
    """What to do said without "you" or an imperative: "Owners might wish to ...", a method "by lowering ...".
    For a "how do I" question that sentence is preferred over the better-scored description before it."""
    quotes = choose(
        conn,
        "How do I keep a gadget shiny for longer?",
        {"A gadget loses its shine": 0.9, "Owners might wish": 0.6},
        ["Dull gadgets"],
    )
    assert any("by lowering the humidity of the cellar." in q for q in quotes)
    says = "SELECT rag._says_what_to_do(%s)"
    for span, expected in [
        ("Administrators might wish to reduce the number of page snapshots.", True),
        ("The volume can be reduced by increasing the checkpoint interval.", True),
        ("The gadget was made by hand in a small workshop.", False),
        ("A gadget loses its shine in a damp cellar within a year.", False),
    ]:
        assert conn.execute(says, (span,)).fetchone()[0] is expected, span


def test_which_question_prefers_the_span_naming_what_it_asks_for(conn, gadgets):
    """ "Which colours ...?" asks for colours: the span that names them ("three colours") gets 0.1, enough to
    win over a span of a better-ranked passage scored a little higher. The kind is read only between
    which/what and an auxiliary verb."""
    features = "SELECT rag._question_features(%s) -> 'asks_for'"
    assert conn.execute(features, ("Which archive format does a parallel pg_dump require?",)).fetchone()[
        0
    ] == [
        "archive",
        "format",
    ]
    for q in ("What does pg_dump do when a table is locked?", "What is a gadget?", "Which is faster?"):
        assert conn.execute(features, (q,)).fetchone()[0] is None, q
    scores = {"Gadget polish keeps": 0.9, "Gadgets come in": 0.91}
    order = ["Gadget polish", "Gadget colours"]
    quotes = choose(conn, "Which colours do gadgets come in?", scores, order, max_quotes=1)
    assert quotes == ["Gadgets come in three colours: red, green and blue."]
    # the same scores for a question that asks for no kind: the better-ranked passage wins
    assert choose(conn, "How are gadgets sold?", scores, order, max_quotes=1)[0].startswith("Gadget polish")


DUST = """# Dusty gadgets

Dust settles on a gadget that stands on a shelf for a month.

# Brushing gadgets

Dust is removed from a gadget with a soft dry brush.
"""


def test_howto_action_meets_its_inflections(conn, gadgets):
    """A how-do-I question's verb ("remove") gets weights.action (0.2) for the span that holds it in any
    inflection ("is removed"): enough to win over a span of the better-ranked passage scored a little higher.
    A question whose verb no span holds, or one with a generic verb, keeps the better passage's span."""
    conn.execute("SELECT * FROM rag.ingest('gadgets', 'dust.md', %s, 'markdown')", (DUST,))
    action = "SELECT rag._question_action(%s)"
    for q, forms in [
        ("How do I remove dust from a gadget?", ["remove", "removes", "removed", "removing"]),
        ("How can I safely copy a table?", ["copy", "copies", "copied", "copying"]),
        ("How to drop an index?", ["drop", "drops", "dropped", "dropping"]),
        ("How should I rebuild a GIN index?", ["rebuild", "rebuilds", "rebuilded", "rebuilding", "rebuilt"]),
        ("How do I apply the changes?", ["apply", "applies", "applied", "applying"]),
        ("how do we fix a broken archive?", ["fix", "fixes", "fixed", "fixing"]),
    ]:
        assert conn.execute(action, (q,)).fetchone()[0] == forms, q
    for q in (
        "How do I use pg_dump?",
        "How do I make a backup?",
        "What is VACUUM?",
        "Why is my gadget dull?",
    ):
        assert conn.execute(action, (q,)).fetchone()[0] is None, q
    assert conn.execute("SELECT (rag._quote_weights() ->> 'action')::float8").fetchone()[0] == 0.2
    scores = {"Dust settles": 0.9, "Dust is removed": 0.88}
    order = ["Dusty gadgets", "Brushing gadgets"]
    for q in ("How do I remove dust from a gadget?", "How can I quickly remove the dust of a gadget?"):
        assert choose(conn, q, scores, order, max_quotes=1) == [
            "Dust is removed from a gadget with a soft dry brush."
        ], q
    for q in (
        "How do I clean dust off a gadget?",
        "How do I get the dust off a gadget?",
        "Where does dust settle?",
    ):
        assert choose(conn, q, scores, order, max_quotes=1)[0].startswith("Dust settles"), q


def test_why_answer_carries_a_reason(conn, gadgets):
    order = ["Gadget polish", "Gadget colours", "Rust", "Polishing a gadget"]
    scores = {"Gadget polish keeps": 0.9, "Gadgets come in": 0.85, "Gadgets rust because": 0.8}
    quotes = choose(conn, "Why do my gadgets rust?", scores, order)
    assert quotes[0].startswith("Gadget polish keeps")
    assert quotes[1:] == ["Gadgets rust because the frobnicator keeps them in a damp cellar."]


def test_second_passage_completes_the_answer(conn, gadgets):
    """A question that is neither "how" nor "why": the best span of the next passage not quoted yet joins the
    answer when it is within 0.35 of the best; max_quotes still bounds the answer."""
    order = ["Gadget polish", "Gadget colours", "Rust", "Polishing a gadget"]
    scores = {"Gadget polish keeps": 0.9, "Gadgets come in": 0.75, "Gadgets rust": 0.8}
    quotes = choose(conn, "What are gadgets like?", scores, order)
    assert quotes == [
        "Gadget polish keeps a gadget shiny for years.",
        "Gadgets come in three colours: red, green and blue.",
    ]
    assert choose(conn, "What are gadgets like?", scores, order, max_quotes=1) == quotes[:1]
    far = choose(conn, "What are gadgets like?", {"Gadget polish keeps": 0.9, "Gadgets come in": 0.6}, order)
    assert far == quotes[:1]


# Section reach: a quote may come from another chunk of a passage's section (the nearest eight, its score less
# 0.05, ranked as that passage); the chunk it names joins chunk_ids and evidence.section_chunks.
CRATES_A = (
    "Shipping is done by rail, shipping happens on Mondays and shipping is cheap. A crate is made of wood, "
    "a crate is painted red and crates are stacked in the yard. Widgets are fragile and widgets are wrapped "
    "in paper."
)
CRATES_B = "The rail company was founded long ago. A shipping crate holds one gross of widgets, twelve dozen."


def test_lexical_path_does_not_reach_into_the_section(pg, core_db):
    """On the lexical path (no stored sentences, no PL/Python: ts_rank scores) the section is not reached:
    only the chunk retrieved (k 1) is quoted, though the sentence that answers is in the section's second
    chunk. rag.verify refuses a quote of a chunk it is not given."""
    e1 = [1.0] + [0.0] * 383
    e2 = [0.0, 1.0] + [0.0] * 382
    section = {"anchor": "crates", "section_path": "Crates", "title": "Crates"}
    items = [
        {"content": CRATES_A, "embedding": e1, **section},
        {"content": CRATES_B, "embedding": e2, **section},
    ]
    q = "[" + ",".join(str(x) for x in e1) + "]"
    with pg.admin(core_db) as c:
        c.execute("SELECT rag.create_tenant('c')")
        c.execute("SELECT * FROM rag.store_document('c', 'crates.md', %s)", (json.dumps(items),))
        ids = dict(c.execute("SELECT content, chunk_id FROM rag.chunk WHERE tenant = 'c'").fetchall())
        a = ask(c, "How many widgets does a shipping crate hold?", tenant="c", k=1, query_embedding=q)
        assert a["evidence"]["sentence_scoring"] == "lexical"
        assert [x["chunk_id"] for x in a["evidence"]["chunks"]] == [ids[CRATES_A]]
        assert_verbatim(c, a)
        assert {x["chunk_id"] for x in a["citations"]} == {ids[CRATES_A]}
        assert "section_chunks" not in a["evidence"]
        fact = "A shipping crate holds one gross of widgets, twelve dozen."
        cited_b = [{"n": 1, "chunk_id": ids[CRATES_B], "quote": fact}]
        status = c.execute(
            "SELECT status FROM rag.verify(%s, %s, %s)", (fact + " [1]", json.dumps(cited_b), [ids[CRATES_A]])
        ).fetchone()[0]
        assert status == "abstained"


_NOTES = " ".join(
    f"The tower keeper writes note number {i} about the weather in the harbour log." for i in range(1, 30)
)
LAMPS = f"""# Lighthouse lamps

How long does a lighthouse lamp burn on one litre of paraffin oil? Visitors ask how long a lighthouse lamp \
burns on one litre of paraffin oil.

{_NOTES}

A lighthouse lamp burns for eleven hours on one litre of paraffin oil.

# Harbour fees

Ships pay a harbour fee for every night they stay at the quay.
"""


def test_quote_from_another_chunk_of_the_section(conn, db):
    """PL/Python path (stored sentences, MiniLM): the one chunk retrieved (k 1) only repeats the question; the
    fact is two chunks further down the same section and is quoted from there, with exact offsets, the chunk
    in evidence.section_chunks and in the logged chunk_ids; the ask replays identically."""
    conn.execute("SELECT rag.create_tenant('lamps')")
    conn.execute("SELECT * FROM rag.ingest('lamps', 'lamps.md', %s, 'markdown')", (LAMPS,))
    chunks = conn.execute(
        "SELECT chunk_id, chunk_index, anchor FROM rag.chunk WHERE tenant = 'lamps' ORDER BY chunk_index"
    ).fetchall()
    fact = next(
        cid
        for cid, _, _ in chunks
        if "eleven hours"
        in conn.execute("SELECT content FROM rag.chunk WHERE chunk_id = %s", (cid,)).fetchone()[0]
    )
    a = ask(conn, "How long does a lighthouse lamp burn on one litre of paraffin oil?", tenant="lamps", k=1)
    first = a["evidence"]["chunks"][0]["chunk_id"]
    assert len(a["evidence"]["chunks"]) == 1 and first != fact
    assert_verbatim(conn, a)
    quoted = {c["chunk_id"]: c["quote"] for c in a["citations"]}
    assert quoted[fact] == "A lighthouse lamp burns for eleven hours on one litre of paraffin oil."
    reached = a["evidence"]["section_chunks"]
    assert [r["chunk_id"] for r in reached] == [fact] and reached[0]["section_of"] == first
    assert reached[0]["anchor"] == a["evidence"]["chunks"][0]["anchor"] == "lighthouse-lamps"
    ask_id, logged = conn.execute(
        "SELECT ask_id, chunk_ids FROM rag.ask_log WHERE tenant = 'lamps' ORDER BY ask_id DESC LIMIT 1"
    ).fetchone()
    assert logged == [first, fact]
    assert conn.execute("SELECT identical FROM rag.replay(%s)", (ask_id,)).fetchone()[0] is True
    # the section's other chunks, nearest first, ranked as the passage; never another section's chunk
    reach = conn.execute("SELECT rag._section_chunks('lamps', %s, 8)", ([first],)).fetchone()[0]
    same = [cid for cid, _, anchor in chunks if anchor == "lighthouse-lamps" and cid != first]
    assert [r["chunk_id"] for r in reach] == same and {r["rank"] for r in reach} == {1}
    assert all(r["section_of"] == first for r in reach)
    assert not {cid for cid, _, anchor in chunks if anchor != "lighthouse-lamps"} & {
        r["chunk_id"] for r in reach
    }


# Lower chunks: a chunk ranked below the passages (down to rank 10, below k too) whose best sentence beats
# every passage's best by 0.065 competes for quotes (counted as rank 2); it joins chunk_ids and
# evidence.lower_chunks.
LAMP_ROOM = """# Lighthouse lamp paraffin oil burn litre

The lighthouse lamp room holds the lighthouse lamp, the lens and a store of paraffin oil for the \
lamp to burn. Keepers carried the paraffin oil up to the lighthouse lamp in litre cans, one litre at \
a time. The lighthouse lamp room was painted white inside, and the lamp burns paraffin oil.
"""
LAMP_CANS = """# Lamp rooms

The lamp room of a lighthouse holds the lamp, the lens and a store of paraffin oil. Keepers \
carried the paraffin oil up in litre cans. A lighthouse lamp room was painted white inside.
"""
HANDBOOK = """# Keeper's handbook

Keepers trimmed the wicks at dusk. A lighthouse lamp burns for eleven hours on one litre of \
paraffin oil. The handbook was printed in 1890.
"""


def test_quote_from_a_chunk_ranked_below_the_passages(conn, db):
    """PL/Python path: with one passage and k 1, the chunk ranked first (the question's words, no answer)
    is the only one retrieved; the fact is in a chunk ranked below it, whose sentence scores far above the
    passage's best. It is quoted first, with exact offsets, listed in evidence.lower_chunks (its fused rank,
    counted as 2) and in the logged chunk_ids, and the ask replays identically. A question the passage
    answers itself quotes no lower chunk."""
    conn.execute("SELECT rag.create_tenant('keepers')")
    conn.execute("SELECT * FROM rag.ingest('keepers', 'room.md', %s, 'markdown')", (LAMP_ROOM,))
    conn.execute("SELECT * FROM rag.ingest('keepers', 'handbook.md', %s, 'markdown')", (HANDBOOK,))
    conn.execute("SELECT * FROM rag.ingest('keepers', 'cans.md', %s, 'markdown')", (LAMP_CANS,))
    ids = dict(conn.execute("SELECT doc_key, chunk_id FROM rag.chunk WHERE tenant = 'keepers'").fetchall())
    question = "How long does a lighthouse lamp burn on one litre of paraffin oil?"
    cur = conn.execute(
        "SELECT ask_id, status, answer, citations, evidence FROM rag.ask(%s, 'keepers', 1, options => %s)",
        (question, json.dumps({"passages": 1})),
    )
    ask_id, *rest = cur.fetchone()
    a = dict(zip(("status", "answer", "citations", "evidence"), rest, strict=True))
    assert [x["chunk_id"] for x in a["evidence"]["chunks"]] == [ids["room.md"]]
    assert_verbatim(conn, a)
    assert a["citations"][0]["chunk_id"] == ids["handbook.md"]
    fact = "A lighthouse lamp burns for eleven hours on one litre of paraffin oil."
    assert a["citations"][0]["quote"] == fact
    lower = a["evidence"]["lower_chunks"]
    assert [(x["chunk_id"], x["counted_as"]) for x in lower] == [(ids["handbook.md"], 2)]
    assert lower[0]["rank"] == 2
    assert lower[0]["anchor"] == "keepers-handbook"
    logged = conn.execute("SELECT chunk_ids FROM rag.ask_log WHERE ask_id = %s", (ask_id,)).fetchone()[0]
    assert logged == [ids["room.md"], ids["handbook.md"]]
    assert conn.execute("SELECT identical FROM rag.replay(%s)", (ask_id,)).fetchone()[0] is True
    # the passage answers this one: nothing from below it
    b = conn.execute(
        "SELECT status, answer, citations, evidence FROM rag.ask(%s, 'keepers', 1, options => %s)",
        ("What colour is the inside of the lighthouse lamp room painted?", json.dumps({"passages": 1})),
    ).fetchone()
    assert b[0] == "answered" and "white inside" in b[1]
    assert "lower_chunks" not in b[3] and {c["chunk_id"] for c in b[2]} == {b[3]["chunks"][0]["chunk_id"]}


def test_lexical_scores_leave_out_what_shares_nothing_with_the_question(pg, core_db):
    """Lexical path: a span scores 0.5 x the share of the question's lexemes it holds plus its ts_rank, in the
    units of the margins of quote choice. So a second passage's sentence that shares no word with the question
    does not complete the answer (ts_rank alone, under 0.1, left every span within 0.35 of the best)."""
    e1 = [1.0] + [0.0] * 383
    e2 = [0.0, 1.0] + [0.0] * 382
    items = [
        {
            "content": CRATES_B,
            "embedding": e1,
            "anchor": "crates",
            "section_path": "Crates",
            "title": "Crates",
        },
        {
            "content": "The frobnicator museum opens at nine every morning.",
            "embedding": e2,
            "anchor": "museum",
            "section_path": "Museum",
            "title": "Museum",
        },
    ]
    q = "[" + ",".join(str(x) for x in e1) + "]"
    with pg.admin(core_db) as c:
        c.execute("SELECT rag.create_tenant('m')")
        c.execute("SELECT * FROM rag.store_document('m', 'm.md', %s)", (json.dumps(items),))
        a = ask(c, "How many widgets does a shipping crate hold?", tenant="m", k=2, query_embedding=q)
        assert a["evidence"]["sentence_scoring"] == "lexical" and len(a["evidence"]["chunks"]) == 2
        assert_verbatim(c, a)
        assert [x["quote"] for x in a["citations"]] == [
            "A shipping crate holds one gross of widgets, twelve dozen."
        ]
        scored = c.execute(
            "SELECT rag._lexical_sentences('english', rag._fts_query('english', %s), %s)",
            ("widgets crate", json.dumps([{"chunk_id": 1, "content": "A crate of widgets. Nothing here."}])),
        ).fetchone()[0]
        assert [(x["quote"], x["share"]) for x in scored] == [
            ("A crate of widgets.", 1.0),
            ("Nothing here.", 0.0),
        ]
        assert 0.5 < scored[0]["score"] < 0.6 and scored[1]["score"] == 0


# Round 3 (session 6): a short statement carried on by the next sentence that speaks of it, and numbers for a
# question that asks how many.
RECEIPTS = """# Gadget receipts

The gadget receipt is a small card. It lists the buyer, the price and the date of sale.

Receipts are printed by the frobnicator.

# Gadget crates

Gadget crates are stacked in the yard of the frobnicator. A full crate holds 144 gadgets.
"""


def test_statement_carried_on_by_the_next_sentence(conn):
    """PL/Python path: the sentence that names the receipt only says it is a card; the next one, which
    speaks of it ("It lists ..."), says what is on it, and is quoted with it as one span, offsets exact."""
    conn.execute("SELECT rag.create_tenant('receipts')")
    conn.execute("SELECT * FROM rag.ingest('receipts', 'receipts.md', %s, 'markdown')", (RECEIPTS,))
    a = ask(conn, "What is written on a gadget receipt?", tenant="receipts", k=1)
    assert a["evidence"]["sentence_scoring"] == "minilm"
    assert_verbatim(conn, a)
    assert any(
        c["quote"].startswith("The gadget receipt is a small card. It lists the buyer, the price")
        for c in a["citations"]
    ), a["answer"]
    # the pick itself, on given scores: only the statement scores well; without the rule it is quoted alone
    rows = conn.execute(
        "SELECT c.chunk_id, c.content, s.start_pos, s.end_pos FROM rag.chunk AS c JOIN rag.sentence AS s "
        "USING (chunk_id) WHERE c.tenant = 'receipts' AND c.title = 'Gadget receipts' ORDER BY s.start_pos"
    ).fetchall()
    scored = [
        {"chunk_id": i, "start": s, "end": e, "score": 0.9 if t[s:e].startswith("The gadget") else 0.1}
        for i, t, s, e in rows
    ]
    sql = "SELECT rag._choose_quotes(%s, %s, %s, %s, 2, 0.08, 0.1)"
    q = "What is written on a gadget receipt?"
    picked = conn.execute(sql, (q, q, [rows[0][0]], json.dumps(scored))).fetchone()[0]
    assert [p["quote"] for p in picked] == [
        "The gadget receipt is a small card. It lists the buyer, the price and the date of sale."
    ]
    assert rows[0][1][picked[0]["start"] : picked[0]["end"]] == picked[0]["quote"]
    assert conn.execute("SELECT (rag._quote_weights() ->> 'forward')::int").fetchone()[0] >= len(rows[0][1])


def test_lexical_path_carries_the_statement_on(pg, core_db):
    """Core lexical path: the next sentence shares no word with the question (it scores 0), yet it is quoted
    with the statement it carries on."""
    e = [1.0] + [0.0] * 383
    receipts = RECEIPTS.split("\n# ")[0].split("\n", 1)[1].strip()
    items = [{"content": receipts, "embedding": e, "title": "Gadget receipts"}]
    q = "[" + ",".join(str(x) for x in e) + "]"
    with pg.admin(core_db) as c:
        c.execute("SELECT rag.create_tenant('r')")
        c.execute("SELECT * FROM rag.store_document('r', 'r.md', %s)", (json.dumps(items),))
        a = ask(c, "What is written on a gadget receipt?", tenant="r", query_embedding=q)
        assert a["evidence"]["sentence_scoring"] == "lexical"
        assert_verbatim(c, a)
        assert a["citations"][0]["quote"] == (
            "The gadget receipt is a small card. It lists the buyer, the price and the date of sale."
        )


def test_how_many_question_prefers_the_number(conn, gadgets):
    """A question asking how many prefers, by 0.2, the span that gives a number; another question does not."""
    conn.execute("SELECT * FROM rag.ingest('gadgets', 'crates.md', %s, 'markdown')", (RECEIPTS,))
    rows = conn.execute(
        "SELECT c.chunk_id, c.content, s.start_pos, s.end_pos FROM rag.chunk AS c JOIN rag.sentence AS s "
        "USING (chunk_id) WHERE c.tenant = 'gadgets' AND c.title = 'Gadget crates' ORDER BY s.start_pos"
    ).fetchall()
    scored = [
        {"chunk_id": i, "start": s, "end": e, "score": 0.9 if t[s:e].startswith("Gadget crates") else 0.72}
        for i, t, s, e in rows
    ]
    sql = "SELECT rag._choose_quotes(%s, %s, %s, %s, 2, 0.08, 0.1)"
    for q, number in (("How many gadgets fit in one crate?", True), ("Where are gadget crates kept?", False)):
        picked = conn.execute(sql, (q, q, [rows[0][0]], json.dumps(scored))).fetchone()[0]
        assert all(rows[0][1][p["start"] : p["end"]] == p["quote"] for p in picked)
        assert ("144" in picked[0]["quote"]) is number, (q, picked)
    assert conn.execute("SELECT rag._question_features('How many gadgets fit?') ->> 'quantity'").fetchone()[0]


# The question's words weighted by how specific they are in the tenant (weights.idf): "widget" is in every
# chunk, "glaze" in one.
GLAZE = """# Cellar

Widgets are stored in the cellar.

# Market

Widgets are sold on Mondays.

# Counting

Every widget is counted twice.

# Painter

The widget painter works at night.

# Weight

A widget weighs little.

# Finishing

A glaze is brushed on last. Widgets are wrapped in paper.
"""


def test_specific_words_weigh_more_in_span_scores(conn):
    """PL/Python path: of two sentences that each hold one of the question's two words, the one holding the
    word only one chunk of the tenant has scores the larger overlap (equal shares without the weighting)."""
    conn.execute("SELECT rag.create_tenant('glaze')")
    conn.execute("SELECT * FROM rag.ingest('glaze', 'glaze.md', %s, 'markdown')", (GLAZE,))
    ids = [
        r[0]
        for r in conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'glaze' ORDER BY chunk_index")
    ]
    assert len(ids) == 6
    q = "What about the glaze on widgets?"
    # the term weights computed inside (NULL) or given, as rag._answer gives them (rag._question_term_weights)
    scored = conn.execute(
        "SELECT rag._sentence_scores(%s, rag.embed(%s), %s, NULL)", (q, q, ids[-1:])
    ).fetchone()[0]
    given = conn.execute(
        "SELECT rag._sentence_scores(%s, rag.embed(%s), %s, rag._question_term_weights(%s, %s))",
        (q, q, ids[-1:], q, ids[-1]),
    ).fetchone()[0]
    assert given == scored
    content = conn.execute("SELECT content FROM rag.chunk WHERE chunk_id = %s", (ids[-1],)).fetchone()[0]
    overlap = {content[s["start"] : s["end"]]: _overlap(conn, q, s["terms"], ids[-1]) for s in scored}
    w = conn.execute("SELECT (rag._quote_weights() ->> 'idf')::float8").fetchone()[0]
    assert overlap["A glaze is brushed on last."] > 0.5 > overlap["Widgets are wrapped in paper."]
    assert overlap["A glaze is brushed on last."] == pytest.approx(1 / (1 + 1 - w), abs=1e-5)
    assert overlap["Widgets are wrapped in paper."] == pytest.approx((1 - w) / (1 + 1 - w), abs=1e-5)
    # and the scores carry those overlaps
    reference = _reference_scores(conn, q, ids[-1])
    expect = [(x[0], pytest.approx(x[2], abs=1e-4)) for x in reference]
    assert [(s["start"], s["score"]) for s in scored] == expect


def test_lexical_path_weighs_specific_words_more(pg, core_db):
    """Core lexical path: the share of the question's lexemes a span holds is weighted the same way."""
    e = [1.0] + [0.0] * 383
    items = [
        {"content": s.split("\n", 1)[1].strip(), "embedding": e, "title": s.split("\n", 1)[0].lstrip("# ")}
        for s in GLAZE.split("\n# ")
    ]
    with pg.admin(core_db) as c:
        c.execute("SELECT rag.create_tenant('g')")
        c.execute("SELECT * FROM rag.store_document('g', 'glaze.md', %s)", (json.dumps(items),))
        last = c.execute(
            "SELECT chunk_id, content FROM rag.chunk WHERE tenant = 'g' ORDER BY chunk_index DESC"
        )
        chunk_id, content = last.fetchone()
        scored = c.execute(
            "SELECT rag._lexical_sentences('english', rag._fts_query('english', %s), %s)",
            ("glaze widgets", json.dumps([{"chunk_id": chunk_id, "content": content}])),
        ).fetchone()[0]
        share = {x["quote"]: x["share"] for x in scored}
        # without the weighting both hold one lexeme of two: 0.5 each
        assert share["A glaze is brushed on last."] > 0.5 > share["Widgets are wrapped in paper."]
        for x in scored:
            assert content[x["start"] : x["end"]] == x["quote"]


# The gate (round 3): a short definition question's term of two words or more must occur as a phrase in a
# retrieved chunk.
HARBOUR = """# Lantern index

A lantern index is kept by the harbour office. It lists every lantern of the harbour.

# Harbour map

The harbour map shows where each lantern hangs.
"""


def test_definition_term_must_occur_as_a_phrase(conn):
    """PL/Python path: "lantern" and "map" are both in the passages, never as "lantern map": the term counts
    as a name the passages lack (names 0, the score lowered by the names' fourth root); "harbour map" is
    there. A question whose "what is" is followed by no noun phrase names no term."""
    conn.execute("SELECT rag.create_tenant('harbour')")
    conn.execute("SELECT * FROM rag.ingest('harbour', 'harbour.md', %s, 'markdown')", (HARBOUR,))
    absent = ask(conn, "What is a lantern map?", tenant="harbour")
    present = ask(conn, "What is a harbour map?", tenant="harbour")
    assert absent["evidence"]["gate"]["signals"]["names"] == 0
    assert present["evidence"]["gate"]["signals"]["names"] == 1
    assert_verbatim(conn, present)
    q = "SELECT rag._defined_term('english', %s)::text"
    assert conn.execute(q, ("what s a negative index",)).fetchone()[0] == "'negat' <-> 'index'"
    assert conn.execute(q, ("What is a class?",)).fetchone()[0] is None  # one word: left to coverage
    assert conn.execute(q, ("What is written on a gadget receipt?",)).fetchone()[0] is None
    assert (
        conn.execute(q, ("What is the difference between plain VACUUM and VACUUM FULL?",)).fetchone()[0]
        is None
    )


def test_lexical_path_definition_term_must_occur_as_a_phrase(pg, core_db):
    e = [1.0] + [0.0] * 383
    items = [
        {"content": s.split("\n", 1)[1].strip(), "embedding": e, "title": s.split("\n", 1)[0].lstrip("# ")}
        for s in HARBOUR.split("\n# ")
    ]
    q = "[" + ",".join(str(x) for x in e) + "]"
    with pg.admin(core_db) as c:
        c.execute("SELECT rag.create_tenant('h')")
        c.execute("SELECT * FROM rag.store_document('h', 'harbour.md', %s)", (json.dumps(items),))
        absent = ask(c, "What is a lantern map?", tenant="h", query_embedding=q)
        present = ask(c, "What is a harbour map?", tenant="h", query_embedding=q)
        assert absent["evidence"]["sentence_scoring"] == "lexical"
        assert absent["evidence"]["gate"]["signals"]["names"] == 0
        assert present["evidence"]["gate"]["signals"]["names"] == 1
        assert (
            absent["evidence"]["gate"]["signals"]["score"] < present["evidence"]["gate"]["signals"]["score"]
        )


# Round 4: a qualification after a cross-reference. The sentence that answers a question is often qualified by
# the sentence after next, with a pointer to another section in between ("For ..., see ...").
SWEEPS = """# Gadget sweeps

A gadget sweep stops when another job asks for a conflicting lock on the gadget shelf. For the list of shelf \
lock modes, see the gadget lock table. However, a sweep that runs to prevent gadget rust is never stopped.

# Gadget shelves

Gadget shelves are made of oak and hold forty gadgets each.
"""
SWEEP_QUESTION = "Does a conflicting lock on the gadget shelf stop a gadget sweep?"
SWEEP_SPAN = (
    "A gadget sweep stops when another job asks for a conflicting lock on the gadget shelf. For the list of "
    "shelf lock modes, see the gadget lock table. However, a sweep that runs to prevent gadget rust is never "
    "stopped."
)


def sweep_pick(conn, tenant):
    """rag._choose_quotes over the live sweep paragraph, spans split in SQL, only its first sentence scored
    well (0.9, the rest 0.1)."""
    chunk_id, content = conn.execute(
        "SELECT chunk_id, content FROM rag.chunk"
        " WHERE tenant = %s AND title = 'Gadget sweeps' AND retired_at IS NULL",
        (tenant,),
    ).fetchone()
    spans = conn.execute("SELECT start_pos, end_pos FROM rag._text_spans(%s) ORDER BY start_pos", (content,))
    scored = [
        {
            "chunk_id": chunk_id,
            "start": s,
            "end": e,
            "score": 0.9 if content[s:e].startswith("A gadget") else 0.1,
        }
        for s, e in spans.fetchall()
    ]
    picked = conn.execute(
        "SELECT rag._choose_quotes(%s, %s, %s, %s, 2, 0.08, 0.1)",
        (SWEEP_QUESTION, SWEEP_QUESTION, [chunk_id], json.dumps(scored)),
    ).fetchone()[0]
    for p in picked:
        assert content[p["start"] : p["end"]] == p["quote"]
    return [p["quote"] for p in picked]


def test_qualification_after_a_cross_reference(conn):
    """PL/Python path: the best sentence is widened over the pointer ("For ..., see ...") to the "However"
    sentence after it, one contiguous span at exact offsets; a middle sentence that is no pointer stops it."""
    conn.execute("SELECT rag.create_tenant('sweeps')")
    conn.execute("SELECT * FROM rag.ingest('sweeps', 'sweeps.md', %s, 'markdown')", (SWEEPS,))
    a = ask(conn, SWEEP_QUESTION, tenant="sweeps")
    assert a["evidence"]["sentence_scoring"] == "minilm"
    assert_verbatim(conn, a)
    assert any(c["quote"] == SWEEP_SPAN for c in a["citations"]), a["answer"]
    assert sweep_pick(conn, "sweeps") == [SWEEP_SPAN]
    # the same paragraph with a sentence that says something itself in the middle: the first sentence alone
    conn.execute(
        "SELECT * FROM rag.ingest('sweeps', 'sweeps.md', %s, 'markdown')",
        (SWEEPS.replace("For the list of shelf lock modes, see", "Shelf lock modes are listed in"),),
    )
    assert sweep_pick(conn, "sweeps") == [
        "A gadget sweep stops when another job asks for a conflicting lock on the gadget shelf."
    ]


def test_lexical_path_qualification_after_a_cross_reference(pg, core_db):
    """Core lexical path: the same widening over the pointer, from SQL-split spans scored lexically."""
    e = [1.0] + [0.0] * 383
    items = [
        {"content": s.split("\n", 1)[1].strip(), "embedding": e, "title": s.split("\n", 1)[0].lstrip("# ")}
        for s in SWEEPS.split("\n# ")
    ]
    q = "[" + ",".join(str(x) for x in e) + "]"
    with pg.admin(core_db) as c:
        c.execute("SELECT rag.create_tenant('sw')")
        c.execute("SELECT * FROM rag.store_document('sw', 'sweeps.md', %s)", (json.dumps(items),))
        a = ask(c, SWEEP_QUESTION, tenant="sw", query_embedding=q)
        assert a["evidence"]["sentence_scoring"] == "lexical"
        assert_verbatim(c, a)
        assert a["citations"][0]["quote"] == SWEEP_SPAN
        assert sweep_pick(c, "sw") == [SWEEP_SPAN]


# Round 4: a span's score reads the stored embeddings of its neighbours too.
FERRY = """# Ferry timetable

The ferry leaves the harbour at dawn. It stops at two islands on the way. Tickets are sold on board. \
The crossing takes four hours in calm weather.
"""


def _overlap(conn, question, terms, chunk_id):
    """The overlap part of a span's score, computed here: the share of the question's content terms
    (rag._content_terms) among the span's terms, each weighted by rag._question_term_weights with weights.idf
    (1 for a term it does not weigh), or the plain share without."""
    q_terms = conn.execute("SELECT rag._content_terms(%s)", (question,)).fetchone()[0]
    if not q_terms:
        return 0.0
    w_idf = conn.execute("SELECT coalesce((rag._quote_weights() ->> 'idf')::float8, 0)").fetchone()[0]
    if w_idf == 0:
        return sum(t in terms for t in q_terms) / len(q_terms)
    weights = conn.execute("SELECT rag._question_term_weights(%s, %s)", (question, chunk_id)).fetchone()[0]
    return sum(weights.get(t, 1) for t in q_terms if t in terms) / sum(weights.get(t, 1) for t in q_terms)


def _cos(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5
    )


def _reference_scores(conn, question, chunk_id):
    """Each stored sentence's span score of a chunk, computed here from rag.sentence: (1 - context) x its own
    similarity to the question + context x that of the mean of its and its neighbours' embeddings + 0.25 x
    the overlap (_overlap). [(start, sim, score)] in order."""
    qemb = vector_values(conn.execute("SELECT rag.embed(%s)::text", (question,)).fetchone()[0])
    rows = conn.execute(
        "SELECT start_pos, embedding::text, terms FROM rag.sentence WHERE chunk_id = %s ORDER BY start_pos",
        (chunk_id,),
    ).fetchall()
    w = conn.execute("SELECT (rag._quote_weights() ->> 'context')::float8").fetchone()[0]
    embs = [vector_values(e) for _, e, _ in rows]
    out = []
    for i, (start, _, terms) in enumerate(rows):
        window = embs[max(i - 1, 0) : i + 2]
        mean = [sum(col) / len(window) for col in zip(*window, strict=True)]
        sim = _cos(embs[i], qemb)
        overlap = _overlap(conn, question, terms, chunk_id)
        out.append((start, sim, (1 - w) * sim + w * _cos(mean, qemb) + 0.25 * overlap))
    return out


def test_span_score_reads_its_neighbours_embeddings(conn):
    """PL/Python path: each sentence's score is (1 - context) x its own similarity + context x the similarity
    of the mean of its embedding and its neighbours' in the chunk (stored at ingest) + 0.25 x the overlap,
    computed here independently from rag.sentence; context is on."""
    conn.execute("SELECT rag.create_tenant('ferry')")
    conn.execute("SELECT * FROM rag.ingest('ferry', 'ferry.md', %s, 'markdown')", (FERRY,))
    (chunk_id,) = conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'ferry'").fetchone()
    q = "How long does the ferry crossing take?"
    qemb = vector_values(conn.execute("SELECT rag.embed(%s)::text", (q,)).fetchone()[0])
    rows = conn.execute(
        "SELECT start_pos, embedding::text FROM rag.sentence WHERE chunk_id = %s ORDER BY start_pos",
        (chunk_id,),
    ).fetchall()
    assert len(rows) == 4
    embs = [vector_values(e) for _, e in rows]
    w = conn.execute("SELECT (rag._quote_weights() ->> 'context')::float8").fetchone()[0]
    assert w > 0
    scored = conn.execute(
        "SELECT rag._sentence_scores(%s, rag.embed(%s), %s, NULL)", (q, q, [chunk_id])
    ).fetchone()[0]
    assert [s["start"] for s in scored] == [r[0] for r in rows]
    reference = _reference_scores(conn, q, chunk_id)
    for s, (start, sim, score) in zip(scored, reference, strict=True):
        assert s["start"] == start
        assert s["sim"] == pytest.approx(sim, abs=1e-4)
        assert s["sim"] == pytest.approx(_cos(embs[[r[0] for r in rows].index(start)], qemb), abs=1e-4)
        assert s["score"] == pytest.approx(score, abs=1e-4)
        # the neighbours change the score: it is not the sentence's own similarity and overlap
        assert abs(s["score"] - (s["sim"] + 0.25 * _overlap(conn, q, s["terms"], chunk_id))) > 1e-4


def test_sentences_embedded_at_ask_time_score_as_stored_ones(conn):
    """PL/Python path: a chunk stored without its sentences (rag.store_document without `sentences`) has them
    split and embedded at ask time (rag._sentence_vectors); their spans, content words and scores are those of
    the same text ingested with its sentences stored (the content words of a live sentence are taken from the
    text given to rag._sentence_vectors, since session 23)."""
    conn.execute("SELECT rag.create_tenant('ferry_stored')")
    conn.execute("SELECT * FROM rag.ingest('ferry_stored', 'ferry.md', %s, 'markdown')", (FERRY,))
    stored_id, content, title, emb = conn.execute(
        "SELECT chunk_id, content, title, embedding::text FROM rag.chunk WHERE tenant = 'ferry_stored'"
    ).fetchone()
    conn.execute("SELECT rag.create_tenant('ferry_live')")
    items = [{"content": content, "title": title, "embedding": vector_values(emb)}]
    conn.execute("SELECT * FROM rag.store_document('ferry_live', 'ferry.md', %s)", (json.dumps(items),))
    (live_id,) = conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'ferry_live'").fetchone()
    n = conn.execute("SELECT count(*) FROM rag.sentence WHERE chunk_id = %s", (live_id,)).fetchone()[0]
    assert n == 0
    q = "How long does the ferry crossing take?"
    sql = "SELECT rag._sentence_scores(%s, rag.embed(%s), %s, rag._question_term_weights(%s, %s))"
    stored = conn.execute(sql, (q, q, [stored_id], q, stored_id)).fetchone()[0]
    live = conn.execute(sql, (q, q, [live_id], q, stored_id)).fetchone()[0]
    assert len(stored) == 4 and {s["chunk_id"] for s in live} == {live_id}

    def spans(scored):
        return [(s["start"], s["end"], s["terms"]) for s in scored]

    assert spans(live) == spans(stored)
    for a, b in zip(live, stored, strict=True):
        assert a["sim"] == pytest.approx(b["sim"], abs=1e-5)
        assert a["score"] == pytest.approx(b["score"], abs=1e-5)
    # the crossing's sentence scores best on both
    best = max(stored, key=lambda s: s["score"])
    assert content[best["start"] : best["end"]] == "The crossing takes four hours in calm weather."
    assert max(live, key=lambda s: s["score"])["start"] == best["start"]


# Round 4: the overlap part of span scores reads the typo-corrected question, as the lexical query does.
VAULTS = """# Vault keeping

Glimmets are kept in the red vault.

Zorbles are kept in the blue vault.

# Vault hours

The vault keeper opens the doors at nine.
"""


def test_typo_question_overlap_reads_the_corrected_words(conn):
    """PL/Python path: with the question embedded as the mean of the two vault sentences (equal similarity to
    both), only the overlap tells them apart; "zorbels" corrected to "zorbles" makes the Zorbles sentence
    the one quoted (as asked, both share only "kept": the tie goes to the first in the document)."""
    conn.execute("SELECT rag.create_tenant('vaults')")
    conn.execute("SELECT * FROM rag.ingest('vaults', 'vaults.md', %s, 'markdown')", (VAULTS,))
    embs = {
        quote: vector_values(e)
        for quote, e in conn.execute(
            "SELECT substr(c.content, s.start_pos + 1, s.end_pos - s.start_pos), s.embedding::text"
            " FROM rag.sentence AS s JOIN rag.chunk AS c USING (chunk_id)"
            " WHERE c.tenant = 'vaults' AND c.title = 'Vault keeping'"
        ).fetchall()
    }
    mean = [(a + b) / 2 for a, b in zip(*embs.values(), strict=True)]
    qemb = "[" + ",".join(str(x) for x in mean) + "]"
    a = ask(conn, "Where are zorbels kept?", tenant="vaults", query_embedding=qemb)
    assert a["evidence"]["gate"]["corrected_question"] == "where are zorbles kept"
    assert_verbatim(conn, a)
    assert a["citations"][0]["quote"] == "Zorbles are kept in the blue vault.", a["answer"]
    assert not any(c["quote"].startswith("Glimmets") for c in a["citations"])


# Issue #10, session 10: chunks below the passages are scored only when their spans may beat the passages'.
def dev_questions():
    path = Path(__file__).resolve().parent.parent / "eval" / "pgdocs-dev.jsonl"
    return [json.loads(x)["question"] for x in path.read_text().splitlines() if x.strip()]


def test_span_score_bounds_are_never_below_the_scores(conn, db):
    """PL/Python path: rag._answer skips a chunk below the passages when rag._may_score_at_least says none of
    its spans can reach the passages' best + lower_margin, so the bound must hold everywhere: for every
    question of the dev set asked of the tiny corpus, every span of 20 characters or more of every chunk
    scores at most its bound (rag._span_score_bounds, one per such span), each chunk is kept at its own best
    score, and a chunk whose bound is clearly under the threshold is skipped (the bound is not everything,
    it saves work)."""
    ids = [r[0] for r in conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'tiny' ORDER BY 1")]
    assert len(ids) >= 10
    skipped = 0
    for q in dev_questions():
        qemb = conn.execute("SELECT rag.embed(%s)::text", (q,)).fetchone()[0]
        weights = conn.execute("SELECT rag._question_term_weights(%s, %s)", (q, ids[0])).fetchone()[0]
        args = (q, qemb, ids, json.dumps(weights))
        scored = conn.execute("SELECT rag._sentence_scores(%s, %s::vector, %s, %s)", args).fetchone()[0]
        bounds = {
            (r[0], r[1], r[2]): r[3]
            for r in conn.execute("SELECT * FROM rag._span_score_bounds(%s, %s::vector, %s, %s)", args)
        }
        spans = [s for s in scored if s["end"] - s["start"] >= 20]
        assert sorted(bounds) == sorted((s["chunk_id"], s["start"], s["end"]) for s in spans), q
        for s in spans:
            assert s["score"] <= bounds[(s["chunk_id"], s["start"], s["end"])] + 1e-6, (q, s)
        for chunk in ids:
            best = max(s["score"] for s in spans if s["chunk_id"] == chunk)
            bound = max(b for k, b in bounds.items() if k[0] == chunk)
            may = "SELECT rag._may_score_at_least(%s, %s::vector, %s, %s, %s)"
            assert conn.execute(may, (*args[:2], [chunk], args[3], best)).fetchone()[0] == [chunk]
            assert conn.execute(may, (*args[:2], [chunk], args[3], bound + 0.002)).fetchone()[0] == []
        # at the passages' best + lower_margin, as rag._answer asks: some chunks are skipped
        passages_best = max(s["score"] for s in spans if s["chunk_id"] in ids[:3])
        kept = conn.execute(
            "SELECT rag._may_score_at_least(%s, %s::vector, %s, %s, %s)",
            (*args[:2], ids[3:], args[3], passages_best + 0.065),
        ).fetchone()[0]
        assert kept == [i for i in ids[3:] if i in kept]  # in the order given
        skipped += len(ids) - 3 - len(kept)
    assert skipped > 0


def test_an_ask_scores_no_lower_chunk_that_cannot_compete(conn, widgets):
    """PL/Python path: asked what its first passage answers, rag.ask bounds the chunks ranked below the
    passages (rag._may_score_at_least, once) and scores none of them in full: rag._sentence_scores runs for
    the passages (and their section's other chunks, if any) only; before, a third call scored every lower
    chunk."""
    conn.execute("SET track_functions = 'all'")
    question = "How do I create a widget index?"
    a = ask(conn, question)
    assert_verbatim(conn, a)
    assert "lower_chunks" not in a["evidence"]
    assert len(a["evidence"]["chunks"]) == 5  # chunks ranked below the three passages: lower candidates
    passages = [c["chunk_id"] for c in a["evidence"]["chunks"][:3]]
    reach = conn.execute("SELECT rag._section_chunks(%s, %s, 8)", (TENANT, passages)).fetchone()[0]
    calls = function_calls(conn, "_sentence_scores", "_may_score_at_least")
    assert calls == {"_may_score_at_least": 1, "_sentence_scores": 1 + (len(reach) > 0)}


def test_verify_looks_up_only_quotes_not_found_as_written(conn, widgets):
    """rag.verify finds a quote that occurs as written with strpos alone; only one whose white space differs
    from the chunk's goes through rag._quote_span (same offsets). Before session 23 the lookup was the join's
    filter, tested after the call: every quote of every ask went through rag._quote_span (~0.7 ms an ask)."""
    a = ask(conn, "How do I create a widget index?")
    assert_verbatim(conn, a)
    c = a["citations"][0]
    ids = [x["chunk_id"] for x in a["citations"]]
    sql = "SELECT citations FROM rag.verify(%s, %s, %s)"
    conn.execute("SET track_functions = 'all'")

    def calls_of(cited):
        """The citations rag.verify gives, and its and rag._quote_span's calls in that statement (the counts
        of the transaction before and after: an earlier test may have left track_functions on for rag.ask)."""
        before = function_calls(conn, "_quote_span", "verify")
        (got,) = conn.execute(sql, (a["answer"], json.dumps(cited), ids)).fetchone()
        after = function_calls(conn, "_quote_span", "verify")
        return got, {f: after[f] - before.get(f, 0) for f in after if after[f] != before.get(f, 0)}

    exact = [{"n": c["n"], "chunk_id": c["chunk_id"], "quote": c["quote"]}]
    got, calls = calls_of(exact)
    assert (got[0]["quote_start"], got[0]["quote_end"]) == (c["quote_start"], c["quote_end"])
    assert calls == {"verify": 1}
    assert " " in c["quote"]
    spaced = [{"n": c["n"], "chunk_id": c["chunk_id"], "quote": c["quote"].replace(" ", "\n\t ")}]
    got, calls = calls_of(spaced)
    assert (got[0]["quote_start"], got[0]["quote_end"]) == (c["quote_start"], c["quote_end"])
    assert got[0]["quote"] == c["quote"]
    assert calls == {"verify": 1, "_quote_span": 1}


# Round 8 (session 11): the question's condition, parenthesised qualifiers, verbs that begin a noun phrase, a
# list carried on into the next chunk.
GADGET_ROUND8 = """# Gadget weights

Each gadget is weighed on the workshop scale before it leaves, and the scale is checked every week.

If no weight is given, the frobnicator assumes one pound.

# Gadget shipping

Gadget orders are collected every day. Gadgets are shipped on Mondays. (Therefore, a gadget ordered on a \
Tuesday waits six days.) The shipping office is painted blue.
"""


def test_condition_of_the_question(conn, gadgets):
    """A question that sets a condition ("... when I pass none?") prefers by weights.condition (0.1) a span
    that opens with a condition sharing its words or, for an absence, stating one ("If no weight is given"):
    enough to beat a span scored a little higher. Without the condition the better-scored span wins. A
    question word ("When should I ...?") sets no condition."""
    conn.execute("SELECT * FROM rag.ingest('gadgets', 'round8.md', %s, 'markdown')", (GADGET_ROUND8,))
    features = "SELECT rag._question_features(%s) -> 'condition'"
    assert conn.execute(features, ("What does the frobnicator assume when I pass none?",)).fetchone()[0] == {
        "terms": ["none", "pass"],
        "absent": True,
    }
    assert conn.execute(features, ("What happens if I set vacuum_freeze_table_age to 0?",)).fetchone()[0] == {
        "terms": ["set", "vacuum_freeze_table_age"],
        "absent": False,
    }
    for q in ("When should I build a B-tree index?", "What does the frobnicator assume?"):
        assert conn.execute(features, (q,)).fetchone()[0] is None, q
    assert conn.execute("SELECT (rag._quote_weights() ->> 'condition')::float8").fetchone()[0] == 0.1
    scores = {"Each gadget is weighed": 0.9, "If no weight": 0.85}
    order = ["Gadget weights"]
    assert choose(
        conn, "What does the frobnicator assume when I pass none?", scores, order, max_quotes=1
    ) == ["If no weight is given, the frobnicator assumes one pound."]
    assert choose(conn, "What does the frobnicator assume?", scores, order, max_quotes=1)[0].startswith(
        "Each gadget is weighed"
    )
    # a condition that is not an absence and shares no word with the span's: no preference
    assert choose(
        conn, "What does the frobnicator assume if the scale is broken?", scores, order, max_quotes=1
    )[0].startswith("Each gadget is weighed")


def test_parenthesised_qualifier_widens_the_quote(conn, gadgets):
    """A qualifying sentence in parentheses ("(Therefore, ...)") joins the sentence it qualifies, as one
    without them does, though it scores far lower (0.3 to 0.9); the unrelated sentences around them do not."""
    conn.execute("SELECT * FROM rag.ingest('gadgets', 'round8.md', %s, 'markdown')", (GADGET_ROUND8,))
    quotes = choose(
        conn,
        "On which day are gadgets shipped?",
        {"Gadgets are shipped": 0.9, "Gadget orders": 0.5, "(Therefore": 0.3},
        ["Gadget shipping"],
        max_quotes=1,
    )
    assert quotes == [
        "Gadgets are shipped on Mondays. (Therefore, a gadget ordered on a Tuesday waits six days.)"
    ]


def test_verb_opening_a_noun_phrase_is_not_an_imperative(conn):
    """ "Stop words are ..." does not say what to do (its subject is a noun phrase); "Stop the server."
    does."""
    says = "SELECT rag._says_what_to_do(%s)"
    for span, expected in [
        ("Stop words are words that are very common.", False),
        ("Check constraints can be added later.", False),
        ("- Restore points are named by the user.", False),
        ("Stop the server, if it is running.", True),
        ("1. Remove all existing files.", True),
        ("Make sure it is running.", True),
    ]:
        assert conn.execute(says, (span,)).fetchone()[0] is expected, span


REPAIR = (
    "# Repairing a gadget\n\nHere is the procedure:\n\n"
    + "".join(
        f"{i}. Step {i} of the repair: take the gadget part number {i} out of its tray and wipe it with a "
        "soft dry cloth before going on.\n"
        for i in range(1, 13)
    )
    + "\nThe repair is then complete.\n"
)
PARTS = "# Gadget parts\n\nThe tenth part of a gadget is its spring, which is wound by hand.\n"


def test_list_carried_on_into_the_next_chunk(conn, db):
    """A procedure longer than a chunk: its later steps are in the document's next chunk, a lower passage.
    Those steps count halfway towards the rank of the chunk the list began in (weights.list_rank 0.5: a rank
    penalty of 0.05 instead of 0.1), so step 10 scored 0.76 beats the procedure's introduction (0.7) where a
    sentence of another document's chunk at the same rank and score does not."""
    conn.execute("SELECT rag.create_tenant('repairs')")
    conn.execute("SELECT * FROM rag.ingest('repairs', 'repair.md', %s, 'markdown')", (REPAIR,))
    conn.execute("SELECT * FROM rag.ingest('repairs', 'parts.md', %s, 'markdown')", (PARTS,))
    rows = conn.execute(
        "SELECT c.chunk_id, c.doc_key, c.chunk_index, c.content, s.start_pos, s.end_pos FROM rag.chunk AS c "
        "JOIN rag.sentence AS s USING (chunk_id) WHERE c.tenant = 'repairs' "
        "ORDER BY c.doc_key, c.chunk_index, s.start_pos"
    ).fetchall()
    chunks = {(doc, idx): cid for cid, doc, idx, *_ in rows}
    assert set(chunks) == {("repair.md", 0), ("repair.md", 1), ("parts.md", 0)}
    content = {cid: text for cid, _, _, text, *_ in rows}
    step10 = "10. Step 10 of the repair"
    assert step10 in content[chunks[("repair.md", 1)]]

    def pick(second, scores):
        scored = [
            {
                "chunk_id": cid,
                "start": s,
                "end": e,
                "score": next((v for p, v in scores.items() if text[s:e].startswith(p)), 0.1),
            }
            for cid, _, _, text, s, e in rows
        ]
        ids = [chunks[("repair.md", 0)], chunks[second]]
        picked = conn.execute(
            "SELECT rag._choose_quotes(%s, %s, %s, %s, 1, 0.08, 0.1)",
            ("What is done with the tenth part?",) * 2 + (ids, json.dumps(scored)),
        ).fetchone()[0]
        for p in picked:
            assert content[p["chunk_id"]][p["start"] : p["end"]] == p["quote"]
        return [p["quote"] for p in picked]

    assert conn.execute("SELECT (rag._quote_weights() ->> 'list_rank')::float8").fetchone()[0] == 0.5
    quotes = pick(("repair.md", 1), {"Here is the procedure": 0.7, step10: 0.76})
    assert len(quotes) == 1 and quotes[0].startswith(step10)
    # the same score in a chunk that does not carry the list on: the introduction and its steps win
    quotes = pick(("parts.md", 0), {"Here is the procedure": 0.7, "The tenth part": 0.76})
    assert len(quotes) == 1 and quotes[0].startswith("Here is the procedure:\n\n1. Step 1")
    # and the carried-on step still loses when it scores lower
    quotes = pick(("repair.md", 1), {"Here is the procedure": 0.7, step10: 0.74})
    assert quotes[0].startswith("Here is the procedure:")


def test_sibling_passage_competes_as_its_section_chunk(conn, db):
    """PL/Python path: the fact's chunk is retrieved as the second passage, below a passage of the same
    section that only repeats the question. Under a steep rank penalty (0.5 per rank) its spans would count
    0.5 less than the first passage's and the answer would repeat the question alone (measured with `sibling`
    set to -1); as a chunk of that passage's section (`sibling` 0.1) they count 0.1 less, so the fact is
    quoted, with exact offsets, and the ask replays identically."""
    conn.execute("SELECT rag.create_tenant('siblings')")
    conn.execute("SELECT * FROM rag.ingest('siblings', 'lamps.md', %s, 'markdown')", (LAMPS,))
    question = "How long does a lighthouse lamp burn on one litre of paraffin oil?"
    cur = conn.execute(
        "SELECT ask_id, status, answer, citations, evidence FROM rag.ask(%s, 'siblings', 3, options => %s)",
        (question, json.dumps({"passages": 3, "rank_penalty": 0.5})),
    )
    ask_id, *rest = cur.fetchone()
    a = dict(zip(("status", "answer", "citations", "evidence"), rest, strict=True))
    chunks = a["evidence"]["chunks"]
    fact = "A lighthouse lamp burns for eleven hours on one litre of paraffin oil."
    holder = conn.execute(
        "SELECT chunk_id FROM rag.chunk WHERE tenant = 'siblings' AND strpos(content, %s) > 0", (fact,)
    ).fetchone()[0]
    # the premise: the fact's chunk is a passage below a better-ranked one of its own section
    ranked = {c["chunk_id"]: c for c in chunks}
    assert holder in ranked and ranked[holder]["rank"] > 1
    assert chunks[0]["anchor"] == ranked[holder]["anchor"] and chunks[0]["chunk_id"] != holder
    assert "section_chunks" not in a["evidence"] and "lower_chunks" not in a["evidence"]
    assert a["status"] == "answered"
    assert_verbatim(conn, a)
    assert any(c["chunk_id"] == holder and c["quote"] == fact for c in a["citations"]), a["answer"]
    assert conn.execute("SELECT identical FROM rag.replay(%s)", (ask_id,)).fetchone()[0] is True


def test_form_bonuses_of_all_spans_at_once_equal_each_spans_own(conn):
    """rag._choose_quotes scores the form bonuses of its spans with one rag._quote_bonuses call (issue #10,
    session 14; since session 20 of the sentences that stand on their own only): each element is the bonus of
    that span alone, in the spans' order, with the caller's says-what-to-do value for that span (NULL:
    computed) and none when the array is NULL."""
    # as rag._choose_quotes has them: the question's features and the weights of quote choice
    features = conn.execute(
        "SELECT rag._question_features(%s) || jsonb_build_object('weights', rag._quote_weights())",
        ("How do I remove pg_dump's VACUUM output if none is given?",),
    ).fetchone()[0]
    spans = [
        "Use pg_dump and run VACUUM after it.",
        "The vacuum daemon calls pg_dump nightly.",
        "If no output is given, the file is removed.",
        "Nothing of the kind here.",
        "Remove the 3 files with rm.",
    ]
    todo = [False, True, None, True, None]

    def one(span, says):
        return conn.execute(
            "SELECT (rag._quote_bonuses(ARRAY[%s], %s, ARRAY[%s::boolean]))[1]",
            (span, json.dumps(features), says),
        ).fetchone()[0]

    def single(span, says):
        return conn.execute(
            "SELECT rag._quote_bonus(%s, %s, %s)", (span, json.dumps(features), says)
        ).fetchone()[0]

    batch, batch_null = conn.execute(
        "SELECT rag._quote_bonuses(%s::text[], %s, %s::boolean[]), rag._quote_bonuses(%s::text[], %s, NULL)",
        (spans, json.dumps(features), todo, spans, json.dumps(features)),
    ).fetchone()
    assert batch == [one(s, t) for s, t in zip(spans, todo, strict=True)]
    assert batch == [single(s, t) for s, t in zip(spans, todo, strict=True)]
    assert batch_null == [one(s, None) for s in spans]
    # the caller's value counts: the first span says what to do, but was passed false
    howto = float(features["weights"]["howto"])
    assert features["howto"] is True
    assert one(spans[0], True) - one(spans[0], False) == pytest.approx(howto)
    assert batch_null[0] == pytest.approx(batch[0] + howto)
    # the names, the condition and the action made the spans' bonuses differ (the check is not vacuous)
    assert len(set(batch)) >= 3
    assert conn.execute("SELECT rag._quote_bonuses('{}'::text[], '{}'::jsonb, NULL)").fetchone()[0] is None


def _coverage_by_the_rule(conn, question, ids, live):
    """rag._coverage's rule spelt out word by word (the passages' words split on white space, each stripped of
    punctuation and lowered; the lexemes from the tenant's configuration), for comparing with the function."""
    lexeme_cache: dict[str, str | None] = {}

    def lexeme(w):
        if w not in lexeme_cache:
            lexeme_cache[w] = conn.execute(
                "SELECT (tsvector_to_array(to_tsvector('english', %s)))[1]", (w,)
            ).fetchone()[0]
        return lexeme_cache[w]

    def strip(t):
        return re.sub(r"^[^\w]+|[^\w]+$", "", t).lower()

    q = conn.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", (question,)).fetchone()[0]
    occ = []
    for (content,) in conn.execute(
        "SELECT content FROM rag.chunk WHERE chunk_id = ANY (%s) ORDER BY chunk_id", (ids,)
    ).fetchall():
        toks = re.split(r"\s+", content)
        for i, tok in enumerate(toks):
            w = strip(tok)
            if not any(w[:3] == x[:3] for x in q):
                continue
            prev = toks[i - 1] if i > 0 else None
            pw = strip(prev or "")
            prev_lexeme = lexeme(pw)
            plain = (
                prev is None
                or re.search(r"[.,;:!?)\]]$", prev)
                or re.match(r"^[(\[\"']", tok)
                or prev_lexeme is None
                or prev_lexeme in q
                or not re.search("[a-z]", pw)
            )
            occ.append((lexeme(w), None if plain else pw))
    words = []
    for x in q:
        found = conn.execute(
            "SELECT EXISTS (SELECT FROM rag.chunk WHERE chunk_id = ANY (%s)"
            " AND tsv @@ quote_literal(%s)::tsquery)",
            (ids, x),
        ).fetchone()[0]
        df = conn.execute(
            "SELECT coalesce((SELECT live_chunks FROM rag.tenant_lexeme"
            " WHERE tenant = %s AND lexeme = %s), 0)",
            (TENANT, x),
        ).fetchone()[0]
        mods = [m for lx, m in occ if lx == x and m is not None]
        top = max((mods.count(m) for m in set(mods)), default=0)
        bound = bool(mods) and top >= 3 and top >= 0.5 * sum(1 for lx, _ in occ if lx == x)
        words.append({"word": x, "found": found, "generic": df > 0.15 * live, "bound": bound})
    specific = [w for w in words if not w["generic"]]
    covered = [w for w in specific if w["found"] and not w["bound"]]
    return round((len(covered) + 0.5) / (len(specific) + 1), 6), sorted(words, key=lambda w: w["word"])


@pytest.mark.parametrize(
    "question",
    [
        "What is a class?",  # bound: "operator class" in the passages
        "What does an operator class compare?",  # the whole term asked
        "How do I run CREATE WIDGET INDEX in the frobnicator shell?",  # code words, stop words around them
        "Which colours are mixed into one widget, and what's the store's limit?",  # prefixes: colour/colours
        "Is the frobnicator's widget_store (its shell) painted?",  # punctuation, a snake_case word, a quote
    ],
)
def test_coverage_follows_its_rule_word_by_word(conn, widgets, question):
    """rag._coverage (split into arrays since issue #10, session 14) gives what its rule gives, word by word:
    the first word of each passage has no word before it (the last word of the passage before does not
    count), stop words and punctuation before a word leave it unbound, words meet by their first three
    letters."""
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT chunk_id FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL ORDER BY chunk_id",
            (TENANT,),
        ).fetchall()
    ]
    assert len(ids) >= 4
    for live in (len(ids), 10**6):  # the tenant's own count (some words generic) and none generic
        got = conn.execute(
            "SELECT rag._coverage(%s, 'english', %s, %s, %s)", (TENANT, question, ids, live)
        ).fetchone()[0]
        coverage, words = _coverage_by_the_rule(conn, question, ids, live)
        assert words and got["words"] == words
        assert float(got["coverage"]) == pytest.approx(coverage, abs=1e-6)


def test_a_condition_counts_its_first_200_characters(conn):
    """The condition a question sets, and the one a span opens with, are read up to 200 characters after it
    begins (since issue #10, session 14 cut by left() after the match instead of a bounded repetition in the
    pattern, which cost milliseconds to compile): a word past them is not part of the condition."""
    question = "What happens if the " + " ".join(f"alpha{i}" for i in range(40)) + " omegaword?"
    cond = question[question.index("if ") + 3 :]
    f, head, whole = conn.execute(
        "SELECT rag._question_features(%s), rag._content_terms(left(%s, 200)), rag._content_terms(%s)",
        (question, cond, cond),
    ).fetchone()
    assert f["condition"]["terms"] == head
    assert "alpha0" in head and "omegaword" not in head and "omegaword" in whole
    features = conn.execute(
        "SELECT rag._question_features('What if zetaflag is on?')"
        " || jsonb_build_object('weights', rag._quote_weights())"
    ).fetchone()[0]
    assert features["condition"]["terms"] == ["zetaflag"]
    near = "If zetaflag is on, the widget is sealed."
    far = "If " + "the widget " * 20 + "has zetaflag on, it is sealed."
    assert len(far) > 200 + len("If") and far.index("zetaflag") > 200
    bonus = conn.execute(
        "SELECT rag._quote_bonuses(%s::text[], %s, NULL)", ([near, far], json.dumps(features))
    ).fetchone()[0]
    assert bonus[0] - bonus[1] == pytest.approx(float(features["weights"]["condition"]))


def test_span_conditions_are_read_only_where_a_span_opens_with_one(conn):
    """A question's condition is compared with the condition a span opens with ("If no weights are given,
    ..."); a span that opens with none gets no condition bonus, whatever words it holds, and its words are not
    read for it (issue #10, session 16: rag._content_terms ran for every span of such a question)."""
    features = conn.execute(
        "SELECT rag._question_features('What does it return if no weights are given?')"
        " || jsonb_build_object('weights', rag._quote_weights())"
    ).fetchone()[0]
    assert features["condition"]["absent"] is True
    spans = [
        "If no weights are given, the default weights are used.",  # opens with a condition, an absence
        "The default weights are used if no weights are given.",  # the same words, no condition first
        "Weights are never empty: none is missing.",  # absence words, no condition first
        "Unless weights are passed, defaults apply.",  # opens with a condition sharing "weights"
    ]
    conn.execute("SET track_functions = 'all'")
    before = function_calls(conn, "_content_terms").get("_content_terms", 0)
    bonus = conn.execute(
        "SELECT rag._quote_bonuses(%s::text[], %s, ARRAY[false, false, false, false])",
        (spans, json.dumps(features)),
    ).fetchone()[0]
    after = function_calls(conn, "_content_terms").get("_content_terms", 0)
    condition = float(features["weights"]["condition"])
    alone = [
        conn.execute(
            "SELECT rag._quote_bonus(%s, %s, false)",
            (s, json.dumps({**features, "condition": None})),
        ).fetchone()[0]
        for s in spans
    ]
    assert [round(b - a, 6) for b, a in zip(bonus, alone, strict=True)] == [condition, 0, 0, condition]
    # the content words of the two spans that open with a condition only
    assert after - before == 2


def test_a_unit_scores_as_its_best_member_plus_the_bonus_of_its_whole_text(conn, gadgets):
    """An introduction quoted with its code block scores as its best sentence plus the form bonus of the
    whole unit's text: here the name the question asks about (gadget_name) is only in the code, so the unit
    scores the names bonus that its introduction alone would lack. The units' bonuses come from one
    rag._quote_bonuses call (issue #10, session 16: one rag._quote_bonus call per unit)."""
    question = "How do I polish a gadget with gadget_name?"
    conn.execute("SET track_functions = 'all'")
    before = function_calls(conn, "_quote_bonus", "_quote_bonuses")
    rows = conn.execute(
        "SELECT c.chunk_id, c.content, s.start_pos, s.end_pos FROM rag.chunk AS c JOIN rag.sentence AS s"
        " USING (chunk_id) WHERE c.tenant = 'gadgets' AND c.title = 'Polishing a gadget' ORDER BY s.start_pos"
    ).fetchall()
    chunk, content = rows[0][0], rows[0][1]
    scored = [
        {
            "chunk_id": chunk,
            "start": s,
            "end": e,
            "score": 0.6 if content[s:e].startswith("To polish") else 0.1,
        }
        for _, _, s, e in rows
    ]
    picked = conn.execute(
        "SELECT rag._choose_quotes(%s, %s, %s, %s, 1, 0.08, 0.1)",
        (question, question, [chunk], json.dumps(scored)),
    ).fetchone()[0]
    after = function_calls(conn, "_quote_bonus", "_quote_bonuses")
    assert len(picked) == 1
    unit = picked[0]["quote"]
    assert unit.startswith("To polish a gadget, run this command")
    assert unit.endswith("POLISH GADGET gadget_name;\n```")
    intro = next(content[s:e] for _, _, s, e in rows if content[s:e].startswith("To polish"))
    features = json.dumps(
        conn.execute(
            "SELECT rag._question_features(%s) || jsonb_build_object('weights', rag._quote_weights())",
            (question,),
        ).fetchone()[0]
    )
    bonus = "SELECT rag._quote_bonus(%s, %s, NULL)"
    unit_bonus = conn.execute(bonus, (unit, features)).fetchone()[0]
    assert unit_bonus > conn.execute(bonus, (intro, features)).fetchone()[0]  # the name is in the code only
    assert float(picked[0]["score"]) == pytest.approx(round(0.6 + unit_bonus, 6), abs=1e-6)
    # one call for the units, none per unit; none for the sentences that stand on their own, as there is none
    # here (every span is in the unit: since session 20 only those sentences' own bonuses are computed)
    assert after.get("_quote_bonus", 0) - before.get("_quote_bonus", 0) == 0
    assert after["_quote_bonuses"] - before.get("_quote_bonuses", 0) == 1


def test_word_terms_are_each_words_content_terms(conn):
    """rag._word_terms(words)[i] is rag._content_terms(words[i])'s term (NULL for none), for words that reach
    every branch of the stemmer and the stop words, in any case, so the two functions (rag._term_weights uses
    the first since issue #10, session 15) cannot drift apart; also for every word of the tenant's chunks."""
    words = [
        "configurations",
        "Configuration",
        "ations",
        "creation",
        "settings",
        "Setting",
        "ring",
        "queries",
        "ties",
        "indexes",
        "goes",
        "indexed",
        "bed",
        "tables",
        "bus",
        "gas",
        "The",
        "WHICH",
        "used",
        "need",
        "ab",
        "abc",
        "work_mem",
        "pg_dump",
        "1234",
        "x_y",
        "",
        "VACUUMING",
        "analyzed",
        "ies",
    ]
    terms = conn.execute("SELECT rag._word_terms(%s::text[])", (words,)).fetchone()[0]
    each = [conn.execute("SELECT (rag._content_terms(%s))[1]", (w,)).fetchone()[0] for w in words]
    assert terms == each
    assert terms[:8] == ["configur", "configur", "ation", "creation", "sett", "sett", "ring", "quer"]
    assert terms[16:21] == [None, None, None, None, None]
    differ = conn.execute(
        """
        WITH w AS (
            SELECT pg_catalog.array_agg(DISTINCT m.a[1]) AS ws
            FROM rag.chunk AS c, pg_catalog.regexp_matches(c.content, '[A-Za-z0-9_]+', 'g') AS m (a)
        )
        SELECT pg_catalog.cardinality(w.ws), (
            SELECT pg_catalog.count(*) FROM pg_catalog.generate_subscripts(w.ws, 1) AS g (i)
            WHERE (rag._word_terms(w.ws))[g.i] IS DISTINCT FROM (rag._content_terms(w.ws[g.i]))[1]
        )
        FROM w
        """
    ).fetchone()
    assert differ[0] > 100 and differ[1] == 0, differ
    assert conn.execute("SELECT rag._word_terms('{}'::text[]), rag._word_terms(NULL)").fetchone() == ([], [])


# Edge cases of the character tests that replaced regular expressions (issue #10, session 15: fewer distinct
# patterns per ask, so that the backend's cache of 32 compiled ones keeps the rest), each compared with the
# pattern it replaced.
KIND_EDGES = [
    "",
    " ",
    "#",
    "# a",
    "#\ta",
    "#a",
    "###### six",
    "####### seven",
    "   # three blanks",
    "    # four blanks",
    "\t# a tab",
    " ```sql",
    "\t~~~",
    "``x",
    "|a|b|",
    " \t| row",
    "> note",
    "\t>q",
    "- item",
    "1. step",
    "Plain text.",
    "  ## two",
    "##",
    "   ######",
    "## \u00e9",
    None,
]


def test_span_kinds_and_question_heads_as_their_patterns(conn):
    rows = conn.execute(
        r"""
        SELECT t, rag._span_kind(t), CASE
                WHEN t ~ '^[ \t]*(```|~~~)' THEN 'code'
                WHEN t ~ '^[ \t]*\|' THEN 'table'
                WHEN t ~ '^[ \t]*>' THEN 'note'
                WHEN t ~ '^ {0,3}#{1,6}([ \t]|$)' THEN 'heading'
                WHEN t ~ '^[ \t]*([-*+]|[0-9]{1,9}[.)])[ \t]+\S' THEN 'list'
                ELSE 'text' END
        FROM unnest(%s::text[]) AS u (t)
        """,
        (KIND_EDGES,),
    ).fetchall()
    assert [(t, new) for t, new, old in rows if new != old] == []
    kinds = dict((t, new) for t, new, _ in rows)
    assert kinds["###### six"] == "heading" and kinds["####### seven"] == "text"
    assert kinds["   # three blanks"] == "heading" and kinds["    # four blanks"] == "text"
    assert kinds["#a"] == "text" and kinds["#"] == "heading" and kinds["\t# a tab"] == "text"
    heads = [
        "What is X?",
        "What is X, and why?",
        "  What, then?  ",
        "No mark at all",
        "?",
        ",",
        "",
        "a" * 250 + "?",
        "What is é?, y",
        None,
    ]
    rows = conn.execute(
        """
        SELECT h, rag._question_head(h),
            (SELECT CASE WHEN pg_catalog.length(x) <= 200 THEN x END
             FROM pg_catalog.substring(pg_catalog.btrim(h), '^[^,?]*[,?]?') AS x)
        FROM unnest(%s::text[]) AS u (h)
        """,
        (heads,),
    ).fetchall()
    assert [(h, new, old) for h, new, old in rows if new != old] == []
    assert rows[1][1] == "What is X," and rows[2][1] == "What," and rows[7][1] is None
    # code that says what to do: a line opening a fence (at the start or after a newline, after blanks, tabs)
    fences = {
        "```\nls\n```": True,
        "Here:\n  ```\npg_dump db\n```": True,
        "Here:\n\t~~~\nx\n~~~": True,
        "Then ``` is a fence mark.": False,
        "Here:\r```": False,
        "": False,
    }
    got = conn.execute(
        "SELECT t, rag._says_what_to_do(t), t ~ '(^|\\n)[ \\t]*(```|~~~)' FROM unnest(%s::text[]) AS u (t)",
        (list(fences),),
    ).fetchall()
    assert [(t, todo, fence) for t, todo, fence in got if todo != fences[t] or fence != fences[t]] == []
    assert conn.execute("SELECT rag._says_what_to_do(NULL)").fetchone()[0] is None


REGEX_EDGE_QUESTIONS = [
    "WHY?",
    "Why does it fail?",
    "whY do",
    "somewhy",
    "Why-not",
    "how MANY rows",
    "How  many rows?",
    "limitless",
    "at  most",
    "at most",
    "the LONGEST name",
    "HOW DO I remove an index?",
    "  How do I drop a table?",
    "how\tdo i create a role",
    "How to copy a table?",
    "Howl at the moon",
    "how",
    "ho?",
    "Which  archive format does pg_dump use?",
    "WHICH format do I pick?",
    "Whichever works?",
    "WHAT IS A HASH MAP?",
    "What's a negative index?",
    "what s a hash map",
    "Whatever is this?",
    "what",
    "wha",
    "What are multixact IDs used for?",
    "If I strip it, what then?",
    "Without WAL archiving, can I recover?",
    "WHENEVER I run it",
    "unless none is given",
    "what happens when one of the columns is NULL?",
    "When should I vacuum?",
    "Is there a way to do it?",
    "Do I need to restart?",
    "What should I do?",
    "\u212aelvin why",
    "\u0130f I run",
    "\u0131f",
    "caf\u00e9 why",
    "\u00e9",
    "what is \u00e9?",
    "What is " + "x " * 120 + "?",
    "",
    " ",
    "?",
    None,
]
REGEX_EDGE_WORDS = [
    "work_mem",
    "_a",
    "a_",
    "a__b",
    "1_2",
    "\u00e9_x",
    "x_\u00e9",
    "\u00df_1",
    "a_b-c",
    "",
    "_",
    "A_B",
    "\u00fcber_cool",
    "pg_stat_statements",
    "1_a",
    "a_1",
    "__",
    "a\u00a0_b",
]
REGEX_EDGE_WINDOWS = [
    "```x",
    "  ~~~",
    "\t|a",
    ">",
    "#",
    "   - a",
    "1. x",
    "1234567890. x",
    "123456789. x",
    "-x",
    "- ",
    "\t\t* b",
    " 1) z",
    "",
    "``",
    "|",
    "\u00a0- a",
    " \t #",
    "~~",
    "+ \u00e9",
    "*\tx",
]
REGEX_EDGE_ANSWERS = [
    "a [1] b [2].",
    "x  [1][2]",
    "[[1]]",
    "[1234567]",
    "[01]",
    "\n[3]",
    "[5[2]]",
    "no markers",
    "",
    " [ 1]",
    "a\t\n [12] [123456] [1234567] ]",
    "[1] [1] [2]",
    "\u00a0[4]",
    "[]",
    "[",
]


def test_session17_replacements_as_their_patterns(conn):
    """Issue #10, session 17: the question-form patterns that now run only for questions of their form, the
    one pattern of rag._question_names' word test, the paragraph start that shares rag._span_kind's list
    pattern and rag.verify's one marker pattern give what the patterns they replaced gave, under the ask's "C"
    collation and the default one: on edge cases (cases, blanks, tabs, non-ASCII letters, the Kelvin sign,
    NULL) and on every question, sentence, word, chunk offset and answer of the test database
    (tests/regex_originals.py)."""
    import regex_originals

    d = regex_originals.differ(
        conn, REGEX_EDGE_QUESTIONS, REGEX_EDGE_WORDS, REGEX_EDGE_WINDOWS, REGEX_EDGE_ANSWERS
    )
    assert d == {"features": [], "name_words": [], "para_start": [], "markers": []}
    d = regex_originals.differ(conn, *regex_originals.corpus_strings(conn))
    assert d == {"features": [], "name_words": [], "para_start": [], "markers": []}
    # the edge cases are not vacuous: the forms are found where the old patterns found them
    f = {
        q: json.loads(json.dumps(v))
        for q, v in conn.execute(
            'SELECT q, rag._question_features(q COLLATE "C") FROM unnest(%s::text[]) AS u (q) '
            "WHERE q IS NOT NULL",
            (REGEX_EDGE_QUESTIONS,),
        ).fetchall()
    }
    assert f["WHY?"]["why"] and not f["somewhy"]["why"] and f["how MANY rows"]["quantity"]
    assert not f["limitless"]["quantity"] and f["HOW DO I remove an index?"]["action"][0] == "remove"
    assert f["WHICH format do I pick?"]["asks_for"] == ["format"] and f["WHAT IS A HASH MAP?"]["defines"]
    assert f["If I strip it, what then?"]["condition"] is not None
