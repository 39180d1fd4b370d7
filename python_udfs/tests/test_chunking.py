"""Tests for pgcite_udfs.chunking on the real PostgreSQL manual and on small documents."""

from __future__ import annotations

import gc
import re
import time
import tomllib
from pathlib import Path

import lxml.html
import pgcite_udfs
import pytest
from pgcite_udfs.chunking import (
    MAX_DOCUMENT_BYTES,
    Chunk,
    InputError,
    ParseResult,
    chunk_html,
    chunk_markdown,
    chunk_text,
    detect_format,
    estimate_tokens,
    parse,
)
from pgcite_udfs.chunking.tokens import Counter

# The section classes, spelled out independently of the implementation.
SECTION_CLASSES = [
    "sect1",
    "sect2",
    "sect3",
    "sect4",
    "sect5",
    "refsect1",
    "refsect2",
    "refsect3",
    "simplesect",
    "chapter",
    "appendix",
    "preface",
    "part",
    "reference",
    "refentry",
    "article",
    "book",
    "bibliography",
    "bibliodiv",
]
SECTION_XPATH = "//div[{}]".format(
    " or ".join(f"contains(concat(' ', normalize-space(@class), ' '), ' {c} ')" for c in SECTION_CLASSES)
)


def read(manual_dir, name: str) -> str:
    return (manual_dir / name).read_text(encoding="utf-8")


def fits(chunk: Chunk, count, max_tokens: int = 256) -> bool:
    return count(chunk.title) + 2 + chunk.token_count + 2 <= max_tokens


def fences_balanced(text: str) -> bool:
    return sum(1 for ln in text.split("\n") if ln.lstrip().startswith("```")) % 2 == 0


def tables_well_formed(text: str) -> bool:
    """Every run of table lines (outside code fences) starts with a header row and a separator row."""
    lines, in_fence = [], False
    for ln in text.split("\n"):
        if ln.lstrip().startswith("```"):
            in_fence = not in_fence
        lines.append("" if in_fence else ln)
    i = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            if j - i < 2 or not re.fullmatch(r"\|(---\|)+", lines[i + 1]):
                return False
            i = j
        else:
            i += 1
    return True


# --------------------------------------------------------------------------------------------------
# The real manual
# --------------------------------------------------------------------------------------------------

PAGES = [
    "routine-vacuuming.html",
    "indexes-types.html",
    "maintenance.html",
    "sql-vacuum.html",
    "sql-select.html",
    "app-pg-ctl.html",
    "datatype-json.html",
    "sepgsql.html",
    "plpgsql.html",
    "functions-string.html",
    "biblio.html",
]


@pytest.mark.manual
@pytest.mark.parametrize("page", PAGES)
def test_sections_match_independent_count(manual_dir, page):
    html = read(manual_dir, page)
    divs = lxml.html.document_fromstring(html.encode()).xpath(SECTION_XPATH)
    ids = [d.get("id") for d in divs]
    assert divs and all(ids)
    res = chunk_html(html)
    assert res.format == "html"
    assert res.sections_found == len(divs)
    chunk_anchors = {c.anchor for c in res.chunks}
    # every section is either stored (one or more parts) or reported empty, never both
    assert len(chunk_anchors) + len(res.empty_sections) == len(divs)
    assert chunk_anchors | set(res.empty_sections) == set(ids)
    assert not chunk_anchors & set(res.empty_sections)
    assert [c.chunk_index for c in res.chunks] == list(range(len(res.chunks)))


@pytest.mark.manual
def test_wraparound_section(manual_dir, token_counter):
    res = parse(read(manual_dir, "routine-vacuuming.html"), count_tokens=token_counter)
    assert res.format == "html"
    assert res.title == "25.1. Routine Vacuuming"
    assert res.empty_sections == []
    wrap = [c for c in res.chunks if c.anchor == "VACUUM-FOR-WRAPAROUND"]
    assert wrap, "no chunk for VACUUM-FOR-WRAPAROUND"
    assert all("Preventing Transaction ID Wraparound Failures" in c.title for c in wrap)
    assert all(c.title == "25.1.5. Preventing Transaction ID Wraparound Failures" for c in wrap)
    assert all(c.section_path == "25.1. Routine Vacuuming" for c in wrap)
    text = "\n\n".join(c.content for c in wrap)
    assert "PostgreSQL's MVCC transaction semantics depend on being able to compare transaction ID" in text
    assert (
        "To avoid this, it is necessary to vacuum every table in every database at least once "
        "every two billion transactions." in text
    )
    # not the next sibling section (autovacuum), not the nested sect3, not navigation
    assert "actually consists of multiple processes" not in text
    assert "The Autovacuum Daemon" not in text
    assert "Multixact IDs are used to support row locking by multiple transactions" not in text
    assert "Prev" not in text and "Routine Reindexing" not in text
    # the nested sect3 is a chunk of its own, with the right path
    multi = [c for c in res.chunks if c.anchor == "VACUUM-FOR-MULTIXACT-WRAPAROUND"]
    assert multi and multi[0].section_path == (
        "25.1. Routine Vacuuming > 25.1.5. Preventing Transaction ID Wraparound Failures"
    )
    assert "Multixact IDs are used to support row locking" in multi[0].content
    # no navigation or table of contents anywhere on the page
    for c in res.chunks:
        assert "Prev" not in c.content.split()
        assert "25.1.1. Vacuuming Basics" not in c.content  # the TOC entry


@pytest.mark.manual
def test_long_section_is_split_and_keeps_anchor(manual_dir, token_counter):
    res = parse(read(manual_dir, "routine-vacuuming.html"), count_tokens=token_counter)
    wrap = [c for c in res.chunks if c.anchor == "VACUUM-FOR-WRAPAROUND"]
    assert len(wrap) > 1
    idx = [c.chunk_index for c in wrap]
    assert idx == list(range(idx[0], idx[0] + len(idx)))
    assert len({(c.title, c.section_path) for c in wrap}) == 1
    for c in res.chunks:
        assert fits(c, token_counter)
        assert c.token_count == token_counter(c.content)
        assert fences_balanced(c.content)


@pytest.mark.manual
def test_small_budget_still_fits(manual_dir, token_counter):
    res = parse(
        read(manual_dir, "routine-vacuuming.html"), max_tokens=64, overlap=8, count_tokens=token_counter
    )
    assert len({c.anchor for c in res.chunks}) == 8
    for c in res.chunks:
        assert c.content.strip()
        assert fits(c, token_counter, 64)
        assert fences_balanced(c.content)


@pytest.mark.manual
def test_index_types_anchors(manual_dir, token_counter):
    html = read(manual_dir, "indexes-types.html")
    ids = [d.get("id") for d in lxml.html.document_fromstring(html.encode()).xpath("//div[@class='sect2']")]
    assert ids == [
        "INDEXES-TYPES-BTREE",
        "INDEXES-TYPES-HASH",
        "INDEXES-TYPE-GIST",
        "INDEXES-TYPE-SPGIST",
        "INDEXES-TYPES-GIN",
        "INDEXES-TYPES-BRIN",
    ]
    res = parse(html, count_tokens=token_counter)
    by_anchor: dict[str, str] = {}
    for c in res.chunks:
        by_anchor[c.anchor] = by_anchor.get(c.anchor, "") + c.content
    for anchor in ids:
        assert len(by_anchor.get(anchor, "")) > 200, anchor
    assert (
        "store summaries about the values stored in consecutive physical block ranges"
        in (by_anchor["INDEXES-TYPES-BRIN"])
    )
    assert "Hash indexes store a 32-bit hash code" in by_anchor["INDEXES-TYPES-HASH"]
    # <pre> becomes a fenced code block
    assert "```\nCREATE INDEX name ON table USING HASH (column);\n```" in by_anchor["INDEXES-TYPES"]
    titles = {c.anchor: c.title for c in res.chunks}
    assert titles["INDEXES-TYPES-BTREE"] == "11.2.1. B-Tree"


@pytest.mark.manual
def test_table_becomes_markdown(manual_dir):
    res = chunk_html(read(manual_dir, "datatype-numeric.html"))
    text = "\n\n".join(c.content for c in res.chunks if c.anchor == "DATATYPE-NUMERIC")
    assert "| Name | Storage Size | Description | Range |\n|---|---|---|---|" in text
    assert "| smallint | 2 bytes | small-range integer | -32768 to +32767 |" in text
    assert "Table 8.2. Numeric Types" in text
    for c in res.chunks:
        assert tables_well_formed(c.content), c.content


@pytest.mark.manual
def test_split_table_repeats_header(manual_dir, token_counter):
    res = parse(read(manual_dir, "functions-string.html"), count_tokens=token_counter)
    table_chunks = [c for c in res.chunks if "\n|---|" in c.content]
    assert len(table_chunks) > 5
    for c in res.chunks:
        assert fits(c, token_counter)
        assert tables_well_formed(c.content), c.content[:300]


@pytest.mark.manual
def test_admonitions_lists_and_definitions(manual_dir):
    res = chunk_html(read(manual_dir, "routine-vacuuming.html"))
    notes = [c for c in res.chunks if "> **Note:**" in c.content]
    assert notes
    assert any(
        "> **Note:** In earlier versions, it was sometimes necessary to stop the postmaster" in c.content
        for c in notes
    )
    assert any("> **Tip:** Plain VACUUM may not be satisfactory" in c.content for c in res.chunks)
    assert any("> **Warning:** Regularly running commands" in c.content for c in res.chunks)
    basics = "\n".join(c.content for c in res.chunks if c.anchor == "VACUUM-BASICS")
    assert "1. To recover or reuse disk space occupied by updated or deleted rows." in basics
    assert "\n4. To protect against loss of very old data" in basics
    # no leftover admonition heading as a paragraph of its own
    for c in res.chunks:
        assert not re.search(r"(^|\n)(Note|Tip|Warning)\n", c.content)
    # variable lists: the term stays with its definition
    vac = chunk_html(read(manual_dir, "sql-vacuum.html"))
    params = "\n\n".join(c.content for c in vac.chunks if c.title == "Parameters")
    assert "FULL\nSelects “full” vacuum" in params
    assert vac.chunks[0].anchor == "SQL-VACUUM" and vac.chunks[0].title == "VACUUM"
    assert vac.chunks[0].content.startswith("VACUUM — garbage-collect and optionally analyze a database")


@pytest.mark.manual
def test_toc_only_chapter_is_empty(manual_dir):
    html = read(manual_dir, "plpgsql.html")
    res = chunk_html(html)
    assert res.chunks == []
    assert res.sections_found == 1 and res.empty_sections == ["PLPGSQL"]
    with pytest.raises(InputError) as ei:
        parse(html)
    assert ei.value.sqlstate == "22023"
    assert ei.value.message == "document has no text content"
    assert ei.value.hint
    # a sect1 whose text is all in its sect2 children is listed, not stored
    cfg = chunk_html(read(manual_dir, "runtime-config-query.html"))
    assert "RUNTIME-CONFIG-QUERY" in cfg.empty_sections
    assert all(c.anchor != "RUNTIME-CONFIG-QUERY" for c in cfg.chunks)


@pytest.fixture(scope="module")
def whole_manual(manual_dir, token_counter):
    files = sorted(manual_dir.glob("*.html"))
    bodies = [(f.name, f.read_text(encoding="utf-8")) for f in files]
    started = time.perf_counter()
    results: dict[str, ParseResult | InputError] = {}
    for name, body in bodies:
        try:
            results[name] = parse(body, count_tokens=token_counter)
        except InputError as exc:
            results[name] = exc
    elapsed = time.perf_counter() - started
    return bodies, results, elapsed


@pytest.mark.manual
def test_whole_manual(whole_manual, token_counter):
    bodies, results, elapsed = whole_manual
    assert len(bodies) > 1100
    ok = {n: r for n, r in results.items() if isinstance(r, ParseResult)}
    failed = {n: r for n, r in results.items() if isinstance(r, InputError)}
    sections = sum(r.sections_found for r in ok.values())
    chunks = sum(len(r.chunks) for r in ok.values())
    empty = sum(len(r.empty_sections) for r in ok.values())
    print(
        f"\nwhole manual: {len(bodies)} files in {elapsed:.1f}s; sections_found={sections} "
        f"chunks={chunks} empty_sections={empty}; {len(failed)} pages without text: {sorted(failed)}"
    )
    assert elapsed < 60
    assert chunks > 5000
    for name, r in ok.items():
        assert [c.chunk_index for c in r.chunks] == list(range(len(r.chunks))), name
        assert len({c.anchor for c in r.chunks}) + len(r.empty_sections) == r.sections_found, name
        for c in r.chunks:
            assert c.content.strip(), (name, c.anchor)
            assert c.content == c.content.strip()
            assert fits(c, token_counter), (name, c.anchor, c.token_count)
            assert fences_balanced(c.content), (name, c.anchor)
            assert tables_well_formed(c.content), (name, c.anchor)
            assert "Prev" not in c.content.split("\n")
    # pages refused for "no text content" are exactly those whose sections are all empty (TOC only)
    for name, exc in failed.items():
        assert exc.sqlstate == "22023" and exc.message == "document has no text content", name
        body = dict(bodies)[name]
        r = chunk_html(body)
        assert r.chunks == [] and len(r.empty_sections) == r.sections_found >= 1, name
    assert "bookindex.html" in failed and "index.html" in failed
    assert len(failed) < 30


# --------------------------------------------------------------------------------------------------
# Generic and malformed HTML
# --------------------------------------------------------------------------------------------------


def test_generic_html_headings():
    html = """<html><head><title>Guide</title><script>var x = 1;</script></head><body>
    <nav>Home | Docs</nav><p>Preface text.</p>
    <h1 id="top">Guide</h1><p>Intro.</p>
    <h2>First Part</h2><p>Part   one
       text.</p>
    <h3><a name="deep"></a>Deep</h3><p>Deep <code>code</code> text</p>
    <h2>First Part</h2>
    <h2>Second</h2><div class="note"><h3>Note</h3><p>Be careful.</p></div>
    <pre><code class="language-sql">SELECT 1;</code></pre>
    <ul><li>one</li><li>two<ol><li>nested</li></ol></li></ul>
    <footer>copyright</footer></body></html>"""
    res = parse(html)
    assert res.format == "html" and res.title == "Guide"
    assert [(c.anchor, c.title, c.section_path) for c in res.chunks] == [
        (None, "Guide", ""),
        ("top", "Guide", ""),
        ("first-part", "First Part", "Guide"),
        ("deep", "Deep", "Guide > First Part"),
        ("second", "Second", "Guide"),
    ]
    assert res.empty_sections == ["first-part-1"]
    assert res.sections_found == 6
    assert res.chunks[2].content == "Part one text."
    assert res.chunks[3].content == "Deep code text"
    second = res.chunks[4].content
    assert "> **Note:** Be careful." in second
    assert "```sql\nSELECT 1;\n```" in second
    assert "- one\n- two\n  1. nested" in second
    joined = " ".join(c.content for c in res.chunks)
    assert "Home | Docs" not in joined and "copyright" not in joined and "var x" not in joined


def test_generic_html_without_headings_is_one_section():
    res = parse("<div><p>First paragraph.</p><p>Second paragraph.</p></div>")
    assert res.sections_found == 1
    assert [c.content for c in res.chunks] == ["First paragraph.\n\nSecond paragraph."]
    assert res.chunks[0].anchor is None


def test_malformed_html_recovers():
    broken = "<div><p>Hello <b>world</p><p>Second <i>para<table><tr><td>a<td>b</table></div"
    res = parse(broken, fmt="html")
    text = res.chunks[0].content
    assert "Hello world" in text and "Second para" in text
    assert "| a | b |" in text
    res = parse("<html><body><h2>Title<p>unclosed paragraph <span>text</body>")
    assert any("unclosed paragraph text" in c.content for c in res.chunks)


def test_html_table_and_entities():
    html = """<html><body><table><thead><tr><th>Name</th><th>Value</th></tr></thead>
    <tbody><tr><td>a|b</td><td>1 &amp; 2</td></tr><tr><td colspan="2">wide</td></tr></tbody></table>
    <p>x<sup>2</sup> and &lt;tag&gt;</p></body></html>"""
    res = parse(html)
    assert res.chunks[0].content == (
        "| Name | Value |\n|---|---|\n| a\\|b | 1 & 2 |\n| wide |  |\n\nx^2 and <tag>"
    )


def nested(open_tags: str, close_tags: str, depth: int, inner: str) -> str:
    return "<html><body>" + open_tags * depth + inner + close_tags * depth + "</body></html>"


@pytest.mark.parametrize("depth", [300, 1000, 2000])
def test_deep_html_keeps_its_text(depth):
    res = parse(nested("<div>", "</div>", depth, "<p>deep text</p>"))
    assert [c.content for c in res.chunks] == ["deep text"]
    # every construct that renders its content apart (lists, quotes, tables, definitions, sections)
    for tags in [
        ("<ul><li>", "</li></ul>"),
        ("<blockquote>", "</blockquote>"),
        ('<div class="note">', "</div>"),
        ("<table><tr><td>", "</td></tr></table>"),
        ("<dl><dt>t</dt><dd>", "</dd></dl>"),
        ('<div class="sect1"><h2>s</h2>', "</div>"),
        ("<section><h3>s</h3>", "</section>"),
    ]:
        res = parse(nested(*tags, depth // 3, "<p>deep text</p>"))  # up to 3 elements a level
        assert "deep text" in "".join(c.content for c in res.chunks), tags


def test_too_deep_html_is_refused():
    with pytest.raises(InputError) as ei:
        parse(nested("<div>", "</div>", 3000, "<p>deep</p>"))
    assert ei.value.sqlstate == "54000"
    assert ei.value.message == "HTML document is nested too deeply" and "2048" in ei.value.hint


# --------------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------------

MD = """---
title: My Doc
---
Intro text before the first heading.

# Getting Started

Some text with `code` and a list:

- item one. Still one.
- item two

## Install `pgcite`!

```bash
# not a heading
pip install pgcite
```

Setext Heading
--------------

Body here.

## Install pgcite

Duplicate slug.

### Empty Section

## Tail ##
tail text

Big Title
=========
last
"""


def test_markdown_sections():
    res = chunk_markdown(MD)
    assert res.format == "markdown"
    assert res.title == "My Doc"
    got = [(c.anchor, c.title, c.section_path) for c in res.chunks]
    assert got == [
        (None, "My Doc", ""),
        ("getting-started", "Getting Started", ""),
        ("install-pgcite", "Install pgcite!", "Getting Started"),
        ("setext-heading", "Setext Heading", "Getting Started"),
        ("install-pgcite-1", "Install pgcite", "Getting Started"),
        ("tail", "Tail", "Getting Started"),
        ("big-title", "Big Title", ""),
    ]
    assert res.empty_sections == ["empty-section"]
    assert res.sections_found == 8
    assert res.chunks[0].content == "Intro text before the first heading."
    assert res.chunks[2].content == "```bash\n# not a heading\npip install pgcite\n```"
    assert res.chunks[5].content == "tail text"
    assert [c.chunk_index for c in res.chunks] == list(range(7))


def test_markdown_without_front_matter_uses_first_heading_and_thematic_break():
    md = "Preamble line.\n\n---\n\n# Title One\n\ntext\n\n- a\n---\n"
    res = chunk_markdown(md)
    assert res.title == "Title One"
    assert res.chunks[0].title == "Title One" and res.chunks[0].anchor is None
    assert "---" in res.chunks[0].content  # a thematic break, not a setext heading
    assert res.sections_found == 2


def test_markdown_long_section_never_splits_fences(token_counter):
    code = "\n".join(f"SELECT {i}, 'value number {i}' FROM generate_series(1, {i});" for i in range(80))
    prose = " ".join(f"Sentence number {i} explains one more detail of the setup." for i in range(60))
    md = f"# Setup\n\n{prose}\n\n```sql\n{code}\n```\n\n{prose}\n"
    res = parse(md, count_tokens=token_counter)
    assert res.format == "markdown"
    assert len(res.chunks) > 4
    for c in res.chunks:
        assert c.anchor == "setup" and c.title == "Setup"
        assert fits(c, token_counter)
        assert fences_balanced(c.content)
        if "SELECT" in c.content:
            assert c.content.startswith("```sql\n") and c.content.endswith("\n```")
    # prose is split on sentence boundaries
    for c in res.chunks:
        if c.content.startswith("Sentence"):
            assert c.content.endswith("setup.")
    rejoined = "".join(c.content for c in res.chunks if "SELECT" in c.content)
    assert all(f"SELECT {i}," in rejoined for i in range(80))


def test_markdown_slugs():
    res = chunk_markdown("# Hello, World!\na\n# Hello World\nb\n# hello world\nc\n# Ünïcode_name x\nd\n")
    assert [c.anchor for c in res.chunks] == [
        "hello-world",
        "hello-world-1",
        "hello-world-2",
        "ünïcode_name-x",
    ]


# --------------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------------


def test_text_windows_with_overlap(token_counter):
    words = [f"w{i}x" for i in range(2000)]
    text = "\n".join(" ".join(words[i : i + 13]) for i in range(0, 2000, 13))
    res = parse(text, fmt="text", max_tokens=128, overlap=16, count_tokens=token_counter)
    assert res.format == "text" and res.sections_found == 1 and res.title is None
    assert len(res.chunks) > 10
    prev = None
    for c in res.chunks:
        assert c.anchor is None and c.title == "" and c.section_path == ""
        assert c.token_count <= 128 - 4
        assert c.token_count == token_counter(c.content)
        assert c.content in text  # windows break at whitespace, original text preserved
        toks = c.content.split()
        assert all(t in words for t in toks)
        if prev is not None:
            shared = [t for t in toks if t in set(prev)]
            assert shared and token_counter(" ".join(shared)) <= 16
            assert toks[0] == shared[0]
        prev = toks
    assert res.chunks[-1].content.split()[-1] == "w1999x"


def test_text_fallback_counter_and_long_word():
    res = chunk_text("short text " + "x" * 5000, max_tokens=32, overlap=4)
    assert "".join(c.content for c in res.chunks).replace("short text ", "").count("x") >= 5000
    assert all(c.token_count <= 28 for c in res.chunks)
    assert estimate_tokens("hello world") == 2
    assert estimate_tokens("") == 0


# --------------------------------------------------------------------------------------------------
# Detection, validation, token counter
# --------------------------------------------------------------------------------------------------


def test_detect_format(manual_dir):
    assert detect_format(read(manual_dir, "maintenance.html")) == "html"
    assert detect_format("<!DOCTYPE html><p>x") == "html"
    assert detect_format("<p>One <b>two</b></p><p>three</p>") == "html"
    assert detect_format(MD) == "markdown"
    assert detect_format("# Title\n\nJust a paragraph.") == "markdown"
    assert detect_format("Text\n\n```\ncode\n```\n") == "markdown"
    assert detect_format("Plain text. It has sentences.\n\nAnd paragraphs, 3 < 4 > 2.") == "text"
    assert detect_format("a <b>bold</b> claim") == "text"
    # HTML shown inside a Markdown code fence is still Markdown
    assert detect_format("# Example\n\n```html\n<div><p>x</p><p>y</p></div>\n```\n") == "markdown"


def test_input_errors():
    with pytest.raises(InputError) as ei:
        parse("")
    assert ei.value.sqlstate == "22023" and ei.value.hint
    with pytest.raises(InputError) as ei:
        parse(" \n\t ")
    assert ei.value.sqlstate == "22023"
    with pytest.raises(InputError) as ei:
        parse("abc\x00\x01\x02\x03" + "\ufffd" * 10 + "def")
    assert ei.value.sqlstate == "22P02" and ei.value.hint
    with pytest.raises(InputError) as ei:
        parse("some text", fmt="pdf")
    assert ei.value.sqlstate == "22023"
    assert all(f in ei.value.hint for f in ("html", "markdown", "text", "auto"))
    with pytest.raises(InputError) as ei:
        parse("no markup at all, just words.", fmt="html")
    assert ei.value.sqlstate == "22023" and "auto" in ei.value.hint
    with pytest.raises(InputError) as ei:
        parse("<html><body><div class='navheader'>Prev Next</div><script>x()</script></body></html>")
    assert ei.value.sqlstate == "22023" and ei.value.message == "document has no text content"
    with pytest.raises(InputError) as ei:
        parse("# Only\n## Headings\n")
    assert ei.value.message == "document has no text content"
    with pytest.raises(InputError):
        parse("text", max_tokens=4)
    with pytest.raises(InputError):
        parse("text", overlap=200)
    assert isinstance(InputError("x"), ValueError)
    err = InputError("m", sqlstate="22P02", hint="h", detail="d")
    assert (err.message, err.sqlstate, err.hint, err.detail, str(err)) == ("m", "22P02", "h", "d", "m")


def test_size_limit():
    assert MAX_DOCUMENT_BYTES == 20 * 1024 * 1024  # the default of the setting pgcite.max_document_bytes
    body = "word " * (MAX_DOCUMENT_BYTES // 5) + "x"
    with pytest.raises(InputError) as ei:
        parse(body)
    e = ei.value
    assert e.sqlstate == "54000" and e.hint
    limit = MAX_DOCUMENT_BYTES
    assert e.message == f"document is {limit + 1} bytes, over the limit of {limit} bytes"
    # bytes of UTF-8, not characters; the limit itself is allowed
    assert parse("\u00e9" * 5, max_bytes=10).chunks
    with pytest.raises(InputError) as ei:
        parse("\u00e9" * 6, max_bytes=11)
    assert ei.value.sqlstate == "54000" and "12 bytes" in ei.value.message
    for chunk in (chunk_html, chunk_markdown, chunk_text):
        assert chunk("ten bytes.", max_bytes=10).chunks
        with pytest.raises(InputError) as ei:
            chunk("ten bytes..", max_bytes=10)
        assert ei.value.sqlstate == "54000"


# Inputs that took quadratic time (one long word took 6.6 s at 100,000 characters): n -> a body of about
# n characters. Nested HTML stays under libxml2's 2048 levels at 4n, with text at the bottom that every
# level used to re-format.
def nested_html(open_tags: str, close_tags: str, n: int) -> str:
    levels = n // 300  # at most 3 elements a level: 1,600 at n = 160,000
    return open_tags * levels + "word " * (n // 10) + close_tags * levels


PATHOLOGICAL = {
    "text: one long word": ("text", lambda n: "a" * n),
    "markdown: one long word": ("markdown", lambda n: "a" * n),
    "html: one long word": ("html", lambda n: "<p>" + "a" * n + "</p>"),
    "text: a long line of punctuated words": ("text", lambda n: "ab," * (n // 3)),
    "markdown: a long line of dotted words": ("markdown", lambda n: "x.y" * (n // 3)),
    "markdown: a run of dots": ("markdown", lambda n: "a" + "." * n + "b"),
    "markdown: nested list, a line a level": (
        "markdown",
        lambda n: "".join("  " * k + "- item\n" for k in range(int(n**0.5))),
    ),
    "markdown: nested list markers on a line": ("markdown", lambda n: "- " * (n // 2) + "x\n"),
    "markdown: nested quotes on a line": ("markdown", lambda n: "> " * (n // 2) + "x\n"),
    "text: tiny paragraphs": ("text", lambda n: "a\n\n" * (n // 3)),
    "markdown: tiny paragraphs": ("markdown", lambda n: "a\n\n" * (n // 3)),
    "html: tiny paragraphs": ("html", lambda n: "<p>a</p>" * (n // 8)),
    "markdown: tiny sections": ("markdown", lambda n: "# a\nb\n" * (n // 6)),
    "markdown: blank lines": ("markdown", lambda n: "# a\n" + "\n" * n + "b\n"),
    "markdown: heading with blanks": ("markdown", lambda n: "# a" + " " * n + "b\n\ntext\n"),
    "markdown: heading with blanks, closed": ("markdown", lambda n: "# a" + " \t" * (n // 2) + "b #\n\nx\n"),
    "markdown: heading of brackets": ("markdown", lambda n: "# " + "[" * n + "\n\ntext\n"),
    "markdown: heading of <": ("markdown", lambda n: "# " + "<" * n + "\n\ntext\n"),
    "markdown: heading of *a": ("markdown", lambda n: "# " + "*a " * (n // 3) + "\n\ntext\n"),
    "markdown: heading of _a": ("markdown", lambda n: "# " + "_a " * (n // 3) + "\n\ntext\n"),
    "markdown: heading of open images": ("markdown", lambda n: "# " + "![a](" * (n // 5) + "\n\ntext\n"),
    "markdown: front matter title": ("markdown", lambda n: "---\ntitle: a" + " " * n + "b\n---\nx\n"),
    "markdown: comments on a line": ("markdown", lambda n: "<!---->" * (n // 7) + "x\n"),
    "markdown: table separator": ("markdown", lambda n: "| a |\n|---" + " " * n + "x\n| b |\n" * 50),
    "markdown: long fence line": (
        "markdown",
        lambda n: "```" + "x" * (n // 2) + "\n" + "a\n" * (n // 4) + "```",
    ),
    "markdown: long heading, many sections": (
        "markdown",
        lambda n: "# " + "t" * (n // 2) + "\n" + "## s\nx\n" * (n // 14),
    ),
    "html: list item of many blocks": ("html", lambda n: "<ul><li>" + "<p>x</p>" * (n // 8) + "</li></ul>"),
    "html: ragged table": (
        "html",
        lambda n: "<table><tr>" + "<td>x</td>" * (n // 20) + "</tr>" + "<tr><td>y</td></tr>" * (n // 20),
    ),
    "html: backticks in pre": ("html", lambda n: "<pre>" + "`" * n + "</pre>"),
    "html: long id, long section": (
        "html",
        lambda n: f'<h1 id="{"i" * (n // 2)}">t</h1><p>{"w " * (n // 4)}</p>',
    ),
    "html: nested lists": ("html", lambda n: nested_html("<ul><li>", "</li></ul>", n)),
    "html: nested quotes": ("html", lambda n: nested_html("<blockquote>", "</blockquote>", n)),
    "html: nested tables": ("html", lambda n: nested_html("<table><tr><td>", "</td></tr></table>", n)),
    "html: nested divs": ("html", lambda n: nested_html("<div>", "</div>", n)),
    "html: nested sections": ("html", lambda n: nested_html('<div class="sect1"><h2>t</h2>', "</div>", n)),
    "detect: one long line": ("detect", lambda n: "a" * n + "\nb"),
    "detect: open links": ("detect", lambda n: "[a](x" * (n // 5)),
    "detect: brackets": ("detect", lambda n: "[" * n),
}


def best_time(entry: str, body: str, runs: int = 3) -> float:
    """The best of a few runs, without the garbage collector (whose passes grow with whatever else the
    test process holds, not with the input)."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            started = time.perf_counter()
            if entry == "detect":
                detect_format(body)
            else:
                parse(body, entry, allow_empty=True)
            best = min(best, time.perf_counter() - started)
    finally:
        gc.enable()
    return best


@pytest.mark.parametrize("case", PATHOLOGICAL)
def test_linear_time(case):
    entry, build = PATHOLOGICAL[case]
    n = 40_000
    small_body, large_body = build(n), build(4 * n)
    # Quadratic is 16 times the time for 4 times the input, linear 4: a ratio under 8 passes (plus 20 ms
    # for short times). The machine is shared: a run slowed down by others is measured again.
    for _ in range(3):
        small, large = best_time(entry, small_body), best_time(entry, large_body)
        if large < 8 * small + 0.02:
            return
    pytest.fail(f"{case}: {small:.3f}s at n={n}, {large:.3f}s at 4n")


def test_labels_are_bounded():
    # every chunk repeats its anchor, title and path: a huge heading is cut, not repeated in full
    md = "# " + "t" * 5000 + "\n\nintro\n\n" + "## sub\n\ntext\n\n" * 3
    res = parse(md, fmt="markdown")
    top, subs = res.chunks[0], res.chunks[1:]
    assert top.anchor == "t" * 256 and len(top.title) <= 64 * 8
    assert [c.anchor for c in subs] == ["sub", "sub-1", "sub-2"]
    assert all(c.section_path == "\u2026" + "t" * 1023 for c in subs)
    html = f'<h1 id="{"i" * 5000}">Title</h1><p>text</p>'
    assert parse(html).chunks[0].anchor == "i" * 256
    # a title that is a single "token" of 5,000 characters (a real tokenizer's [UNK] for a long word)
    res = parse("# " + "w" * 5000 + "\n\ntext\n", count_tokens=lambda t: len(t.split()))
    assert res.chunks[0].title == "w" * (64 * 8 - 2) + " \u2026"
    # nesting past the limit on paths keeps the innermost titles
    deep = (
        "".join(f'<div class="sect1"><h2>Level {i}</h2><p>text {i}</p>' for i in range(300)) + "</div>" * 300
    )
    last = parse(deep).chunks[-1]
    assert last.content == "text 299"
    assert last.section_path.startswith("\u2026 > Level ") and last.section_path.endswith(" > Level 298")
    assert len(last.section_path) <= 1024


class Stop(Exception):
    pass


# Long documents of every kind, ~100,000 characters each.
PROSE = "A sentence of prose, with words. " * 3000
CHECKPOINT_DOCS = [
    ("html", "<html><body>" + "<p>A paragraph of words.</p>\n" * 4000 + "</body></html>"),
    ("html", '<div class="sect1"><h2>T</h2>' + "<div><ul><li>item</li></ul></div>\n" * 3000 + "</div>"),
    ("html", "<div>" * 1500 + PROSE + "</div>" * 1500),
    ("markdown", "".join(f"# H{i}\n\n" + "Text of the section. " * 20 + "\n\n" for i in range(250))),
    ("markdown", PROSE),
    ("markdown", PROSE.replace(". ", ".\n")),
    ("markdown", "```\n" + "code line\n" * 10000 + "```\n"),
    ("text", PROSE),
    ("text", "x" * 100_000),
]


@pytest.mark.parametrize(("fmt", "body"), CHECKPOINT_DOCS)
def test_checkpoint_is_called_regularly(fmt, body):
    calls = 0

    def checkpoint():
        nonlocal calls
        calls += 1

    plain = parse(body, fmt)
    assert parse(body, fmt, checkpoint=checkpoint) == plain
    assert calls >= len(body) // 20_000, calls  # at least once in every 20,000 characters of input

    def stop_at_third():
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Stop

    calls = 0
    with pytest.raises(Stop):
        parse(body, fmt, checkpoint=stop_at_third)
    assert calls == 3


def test_no_long_uninterruptible_count():
    # a call of the counter cannot be interrupted: long texts are counted in pieces, cut at blanks
    lengths = []

    def counter(text: str) -> int:
        lengths.append(len(text))
        return estimate_tokens(text)

    parse("a" * 1_000_000, "text", count_tokens=counter)
    parse("<p>" + "ab," * 300_000 + "</p>", "html", count_tokens=counter)
    parse("> " * 500_000, "markdown", count_tokens=counter)
    assert max(lengths) <= 1 << 18
    text = "word " * 100_000  # cut at blanks, a text counts what the counter says of it whole
    assert Counter(counter)(text) == estimate_tokens(text) == 100_000


def test_tolerated_inputs():
    # a few control characters are not garbage; format names are case-insensitive
    res = parse("Line one.\x0cLine two.\n", fmt="TEXT")
    assert res.format == "text" and len(res.chunks) == 1
    assert parse("hello", fmt=" auto ").format == "text"
    assert parse("x", fmt="markdown").chunks[0].content == "x"


def test_token_counter(token_counter):
    assert token_counter("") == 0
    assert token_counter("hello world") == 2  # no [CLS]/[SEP]
    long = "word " * 1000
    assert token_counter(long) == 1000  # not truncated at the tokenizer.json's 128
    assert token_counter("VACUUM FULL") == token_counter("VACUUM") + token_counter("FULL")


def test_text_outside_section_divs_is_kept():
    html = """<html><head><title>Doc</title></head><body><div class="navheader">Prev Next</div>
    <p>Loose paragraph outside the sections.</p>
    <div class="section" id="s1"><div class="titlepage"><h2>1. One</h2></div><p>Inside one.</p></div>
    </body></html>"""
    res = parse(html)
    assert [(c.anchor, c.title, c.content) for c in res.chunks] == [
        (None, "Doc", "Loose paragraph outside the sections."),
        ("s1", "1. One", "Inside one."),
    ]
    assert res.sections_found == 2


def test_non_additive_counter_still_fits(manual_dir):
    # a counter that charges extra per newline is not additive over words: chunks must still fit
    def odd_counter(text: str) -> int:
        return estimate_tokens(text) + 3 * text.count("\n")

    html = read(manual_dir, "routine-vacuuming.html")
    res = parse(html, max_tokens=96, overlap=8, count_tokens=odd_counter)
    assert len({c.anchor for c in res.chunks}) == 8
    for c in res.chunks:
        assert c.token_count == odd_counter(c.content)
        assert fits(c, odd_counter, 96)


def test_huge_heading_is_clipped(token_counter):
    para = " ".join(f"word{i}" for i in range(300))
    md = f"{para}\n---\n\nBody text. " + "More body text here. " * 100
    res = parse(md, fmt="markdown", count_tokens=token_counter)
    assert res.sections_found == 1
    for c in res.chunks:
        assert c.title.startswith("word0 word1") and c.title.endswith("\u2026")
        assert token_counter(c.title) <= 256 // 4
        assert fits(c, token_counter)


def test_markdown_html_comments_are_not_content():
    md = (
        "# fs.read(fd)\n"
        "<!-- YAML\nadded: v0.1.8\nchanges:\n  - version: v10.0.0\n-->\n\n"
        "Reads data <!-- lint ignore --> from the file.\n\n"
        "```html\n<!-- kept: this is code -->\n```\n"
        "# Only a comment\n<!-- nothing else here -->\n"
    )
    res = chunk_markdown(md)
    assert [c.title for c in res.chunks] == ["fs.read(fd)"]
    body = res.chunks[0].content
    assert "YAML" not in body and "lint ignore" not in body and "added:" not in body
    assert "Reads data  from the file." in body
    assert "<!-- kept: this is code -->" in body
    assert res.empty_sections == ["only-a-comment"]


def test_every_subpackage_is_packaged():
    root = Path(pgcite_udfs.__file__).parent
    packages = tomllib.loads((root.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = sorted(".".join(p.parent.relative_to(root.parent).parts) for p in root.rglob("__init__.py"))
    assert sorted(packages) == found
