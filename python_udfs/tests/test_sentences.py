"""Tests for pgcite_udfs.sentences.split_sentences."""

from __future__ import annotations

import re

import pytest
from pgcite_udfs.chunking import chunk_html
from pgcite_udfs.sentences import split_sentences


def sents(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


def check_spans(text: str, spans: list[tuple[int, int]]) -> None:
    prev_end = 0
    for s, e in spans:
        assert 0 <= prev_end <= s < e <= len(text), (s, e, prev_end)
        piece = text[s:e]
        assert piece and piece == piece.strip()
        prev_end = e


def uncovered(text: str, spans: list[tuple[int, int]]) -> str:
    out, pos = [], 0
    for s, e in spans:
        out.append(text[pos:s])
        pos = e
    out.append(text[pos:])
    return "".join(out)


def test_basic_sentences():
    assert sents("One sentence. Another one! A question? Yes.") == [
        "One sentence.",
        "Another one!",
        "A question?",
        "Yes.",
    ]
    assert sents("  Leading and trailing space.  ") == ["Leading and trailing space."]
    assert sents("") == [] and sents(" \n\n ") == []
    assert sents("no terminal punctuation") == ["no terminal punctuation"]


def test_abbreviations_do_not_split():
    text = (
        "Use an index, e.g. the B-tree. Use e.g. PostgreSQL or i.e. Oracle. Lists, tables, etc. are fine. "
        "Compare vs. Oracle. See cf. Smith. See Fig. 3 for No. 5 in the list. It takes approx. 5 minutes."
    )
    assert sents(text) == [
        "Use an index, e.g. the B-tree.",
        "Use e.g. PostgreSQL or i.e. Oracle.",
        "Lists, tables, etc. are fine.",
        "Compare vs. Oracle.",
        "See cf. Smith.",
        "See Fig. 3 for No. 5 in the list.",
        "It takes approx. 5 minutes.",
    ]


def test_numbers_initials_and_quotes():
    assert sents("Version 9.6 added it. Release 15.2.1 fixed it. The ratio is 0.5 here.") == [
        "Version 9.6 added it.",
        "Release 15.2.1 fixed it.",
        "The ratio is 0.5 here.",
    ]
    assert sents("J. R. Smith wrote it. The U.S. Navy agreed.") == [
        "J. R. Smith wrote it.",
        "The U.S. Navy agreed.",
    ]
    assert sents('He said "stop." Then he left. (It was late.) [Really.] 3 items remain.') == [
        'He said "stop."',
        "Then he left.",
        "(It was late.)",
        "[Really.]",
        "3 items remain.",
    ]
    assert sents("25.1.5. Preventing Transaction ID Wraparound Failures. Next one.") == [
        "25.1.5. Preventing Transaction ID Wraparound Failures.",
        "Next one.",
    ]
    # lowercase after a period does not start a sentence
    assert sents("The pg_class.relfrozenxid column. e.g. lowercase. The end.") == [
        "The pg_class.relfrozenxid column. e.g. lowercase.",
        "The end.",
    ]


def test_paragraphs_end_sentences():
    assert sents("First paragraph without period\n\nSecond one. Third") == [
        "First paragraph without period",
        "Second one.",
        "Third",
    ]
    # a single newline inside a paragraph is just whitespace
    assert sents("A sentence that\nwraps. Next.") == ["A sentence that\nwraps.", "Next."]


def test_code_fences_are_one_unit():
    code = "```sql\nSELECT 1. AS x; -- Comment. Another\n\nSELECT 2! FROM t. WHERE\n```"
    text = f"Run this. Then:\n\n{code}\n\nDone. Really."
    assert sents(text) == ["Run this.", "Then:", code, "Done.", "Really."]
    # an unclosed fence runs to the end
    assert sents("Text.\n```\nA. B. C.") == ["Text.", "```\nA. B. C."]


def test_lists_tables_quotes():
    text = (
        "Steps:\n"
        "1. Resolve old prepared transactions. You can find these easily.\n"
        "2. End long-running transactions.\n"
        "- bullet one. Bullet two\n"
        "  continued. Last.\n"
        "\n"
        "| Name | Description. More |\n"
        "|---|---|\n"
        "| a. B | c. D |\n"
        "\n"
        "> **Note:** In earlier versions. It was different.\n"
        ">\n"
        "> Second quoted paragraph.\n"
        "# A heading. With dots\n"
        "After."
    )
    assert sents(text) == [
        "Steps:",
        "1. Resolve old prepared transactions.",
        "You can find these easily.",
        "2. End long-running transactions.",
        "- bullet one.",
        "Bullet two\n  continued.",
        "Last.",
        "| Name | Description. More |",
        "| a. B | c. D |",
        "> **Note:** In earlier versions.",
        "It was different.",
        "> Second quoted paragraph.",
        "# A heading. With dots",
        "After.",
    ]


@pytest.mark.manual
def test_offsets_exact_on_manual_chunks(manual_dir):
    pages = sorted(manual_dir.glob("*.html"))[::12]
    chunks = []
    for p in pages:
        chunks.extend(chunk_html(p.read_text(encoding="utf-8")).chunks)
    assert len(chunks) >= 300
    n_sentences = 0
    for c in chunks:
        text = c.content
        spans = split_sentences(text)
        assert spans, c
        check_spans(text, spans)
        n_sentences += len(spans)
        # nothing but whitespace, table separator rows and empty quote lines is left out
        rest = uncovered(text, spans)
        assert re.fullmatch(r"[\s|:>-]*", rest), (c.anchor, rest[:200])
        # code blocks come out whole
        for m in re.finditer(r"(?ms)^```.*?^```$", text):
            assert (m.start(), m.end()) in spans
    assert n_sentences > 3 * len(chunks)


def test_offsets_with_unicode_and_odd_whitespace():
    text = "\u00a0Caf\u00e9 ouvert. \u00c9t\u00e9 chaud!\u2003Ja.\r\n\r\nZweiter Absatz.\t"
    spans = split_sentences(text)
    check_spans(text, spans)
    assert sents(text) == ["Caf\u00e9 ouvert.", "\u00c9t\u00e9 chaud!", "Ja.", "Zweiter Absatz."]
