"""The four chapters of the PostgreSQL manual used by the dev question set (eval/pgdocs-corpus.txt), ingested
for real: the two questions the product promises to handle, and the question set tooling on real data."""

from __future__ import annotations

import json
import re

import pytest
from conftest import CHAPTERS_TENANT, ROOT, chapter_files

pytestmark = pytest.mark.manual
TENANT = CHAPTERS_TENANT


def test_every_chapter_file_ingested(chapters, conn):
    files = chapter_files()
    assert sum(chapters.values()) == len(files) and "failed" not in chapters
    anchors = {
        r[0] for r in conn.execute("SELECT DISTINCT anchor FROM rag.chunk WHERE tenant = %s", (TENANT,))
    }
    expected = set()
    for line in (ROOT / "eval" / "pgdocs-dev.jsonl").read_text().splitlines():
        expected |= set(json.loads(line)["expect"])
    assert expected <= anchors, expected - anchors  # every anchor the question set expects is a chunk


def test_wraparound_is_answered_from_its_section(chapters, conn):
    row = conn.execute(
        "SELECT status, citations FROM rag.ask('How do I prevent transaction ID wraparound failures?', %s)",
        (TENANT,),
    ).fetchone()
    assert row[0] == "answered"
    assert row[1][0]["anchor"] == "VACUUM-FOR-WRAPAROUND" and all(c["verified"] for c in row[1])


def test_capital_of_australia_abstains(chapters, conn):
    row = conn.execute(
        "SELECT status, reason FROM rag.ask('What is the capital of Australia?', %s)", (TENANT,)
    )
    assert row.fetchone() == ("abstained", "no_relevant_sources")


def _verbatim(conn, citations):
    for c in citations:
        row = conn.execute("SELECT content FROM rag.chunk WHERE chunk_id = %s", (c["chunk_id"],)).fetchone()
        content = row[0]
        assert c["verified"] and content[c["quote_start"] : c["quote_end"]] == c["quote"]


def test_howto_answer_quotes_the_command(chapters, conn):
    """Issue #11's example: the passage closest to the question says GIN is the preferred index type; the
    answer must also quote how to create one."""
    status, answer, citations = conn.execute(
        "SELECT status, answer, citations FROM rag.ask(%s, %s)",
        ("How do I create a GIN index for full text search?", TENANT),
    ).fetchone()
    assert status == "answered" and re.search(r"CREATE INDEX \w+ ON \w+ USING GIN \(", answer)
    _verbatim(conn, citations)


def test_psql_commands_are_quoted(chapters, conn):
    status, answer, citations = conn.execute(
        "SELECT status, answer, citations FROM rag.ask(%s, %s)",
        ("Which psql commands show text search configuration objects?", TENANT),
    ).fetchone()
    assert status == "answered" and "\\dF" in answer
    _verbatim(conn, citations)
