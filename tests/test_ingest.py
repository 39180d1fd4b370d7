"""rag.ingest: parse -> chunk -> embed in-database -> immutable versions, change detection, bad input."""

from __future__ import annotations

import threading

import psycopg
import pytest
from conftest import MANUAL, sqlstate_of

WRAPAROUND_SENTENCE = "PostgreSQL's MVCC transaction semantics depend on being able to compare transaction ID"


def counts(conn, tenant):
    return conn.execute(
        "SELECT (SELECT count(*) FROM rag.document WHERE tenant = %(t)s),"
        " (SELECT count(*) FROM rag.chunk WHERE tenant = %(t)s)",
        {"t": tenant},
    ).fetchone()


def embedded_texts(conn) -> int:
    return conn.execute("SELECT (rag.python_info() ->> 'embedded_texts')::int").fetchone()[0]


def ingest(conn, tenant, key, body, fmt="auto", **kw):
    return conn.execute(
        "SELECT doc_key, version, status, chunks, empty_sections FROM rag.ingest(%s, %s, %s, %s,"
        " title => %s, source_url => %s)",
        (tenant, key, body, fmt, kw.get("title"), kw.get("source_url")),
    ).fetchone()


def test_manual_sections_become_chunks_with_their_text(conn):
    rows = conn.execute(
        "SELECT anchor, title, content FROM rag.chunk"
        " WHERE tenant = 'tiny' AND doc_key = 'routine-vacuuming.html' ORDER BY chunk_index"
    ).fetchall()
    by_anchor = {}
    for anchor, title, content in rows:
        by_anchor.setdefault(anchor, []).append((title, content))
    wrap = by_anchor["VACUUM-FOR-WRAPAROUND"]
    assert "Preventing Transaction ID Wraparound Failures" in wrap[0][0]
    assert any(WRAPAROUND_SENTENCE in c for _, c in wrap)
    # the nested sect3 is its own chunk, not part of its parent's text
    assert "VACUUM-FOR-MULTIXACT-WRAPAROUND" in by_anchor
    assert not any("Multixacts are used to support row locking" in c for _, c in wrap)
    # navigation is dropped
    assert not any("Prev" in c and "Next" in c and "Home" in c for _, c in sum(by_anchor.values(), []))
    assert all(c.strip() for _, c in sum(by_anchor.values(), []))


def test_document_row_and_chunk_counts(conn):
    doc = conn.execute(
        "SELECT version, chunk_count, empty_sections, format FROM rag.document"
        " WHERE tenant = 'tiny' AND doc_key = 'indexes-types.html' AND retired_at IS NULL"
    ).fetchone()
    n = conn.execute(
        "SELECT count(*) FROM rag.chunk WHERE tenant = 'tiny' AND doc_key = 'indexes-types.html'"
    ).fetchone()[0]
    assert doc[0] == 1 and doc[1] == n and doc[3] == "html"
    chunked = conn.execute(
        "SELECT count(*) FROM rag.chunk_html(%s)", ((MANUAL / "indexes-types.html").read_text(),)
    ).fetchone()[0]
    assert chunked == n


def test_reingest_identical_is_a_noop(conn):
    body = (MANUAL / "indexes-types.html").read_text()
    before = counts(conn, "tiny")
    embedded = embedded_texts(conn)
    url = "https://www.postgresql.org/docs/15/indexes-types.html"  # as the fixture ingested it
    row = ingest(conn, "tiny", "indexes-types.html", body, "html", source_url=url)
    assert row[2] == "unchanged" and row[1] == 1
    assert counts(conn, "tiny") == before
    assert embedded_texts(conn) == embedded  # no embedding work


def test_new_chunker_version_rechunks_an_unchanged_body(conn):
    """After an upgrade that changes chunking, re-ingesting the same body makes a new version, not a no-op;
    chunk texts that did not change keep their embeddings."""
    conn.execute("SELECT rag.create_tenant('rechunk')")
    md = "# Alpha\n\nAlpha text about vacuum.\n\n# Beta\n\nBeta text about indexes.\n"
    assert ingest(conn, "rechunk", "doc.md", md)[1:3] == (1, "inserted")
    assert ingest(conn, "rechunk", "doc.md", md)[1:3] == (1, "unchanged")
    embedded = embedded_texts(conn)
    version = conn.execute("SELECT rag._chunker_version()").fetchone()[0]
    # stand in for the next release's chunker (rolled back with the test's transaction)
    next_release = f"SELECT {version + 1}"
    conn.execute(
        "CREATE OR REPLACE FUNCTION rag._chunker_version() RETURNS integer LANGUAGE sql AS "
        + psycopg.sql.quote(next_release)
    )
    assert ingest(conn, "rechunk", "doc.md", md)[1:4] == (2, "updated", 2)
    assert embedded_texts(conn) == embedded  # same chunk texts: embeddings reused


def test_changed_document_new_version_reuses_embeddings(conn):
    conn.execute("SELECT rag.create_tenant('chg')")
    parts = ["# Alpha", "Alpha text about vacuum.", "# Beta", "Beta text about indexes.", "# Gamma", "Gamma."]
    md = "\n\n".join(parts)
    first = ingest(conn, "chg", "doc.md", md)
    assert first[1:4] == (1, "inserted", 3)
    old_ids = [r[0] for r in conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'chg' ORDER BY 1")]
    embedded = embedded_texts(conn)
    second = ingest(conn, "chg", "doc.md", md.replace("Beta text about indexes.", "Beta text about B-trees."))
    assert second[1:4] == (2, "updated", 3)
    # only the changed section was embedded: its chunk text and its sentences (stored for choosing quotes)
    changed = conn.execute(
        "SELECT count(*) FROM rag.sentence s JOIN rag.chunk c USING (chunk_id)"
        " WHERE c.tenant = 'chg' AND c.doc_version = 2 AND c.content LIKE '%B-trees%'"
    ).fetchone()[0]
    assert changed >= 1 and embedded_texts(conn) == embedded + 1 + changed
    rows = conn.execute(
        "SELECT chunk_id, doc_version, retired_at IS NOT NULL, content FROM rag.chunk WHERE tenant = 'chg'"
        " ORDER BY chunk_id"
    ).fetchall()
    assert [r[0] for r in rows[:3]] == old_ids
    assert all(r[2] for r in rows[:3]) and not any(r[2] for r in rows[3:])
    assert {r[1] for r in rows[3:]} == {2}
    # retired chunks keep their text for old citations
    assert "Beta text about indexes." in rows[1][3]
    same = conn.execute(
        "SELECT a.embedding = b.embedding FROM rag.chunk a JOIN rag.chunk b USING (tenant, content_hash)"
        " WHERE a.tenant = 'chg' AND a.doc_version = 1 AND b.doc_version = 2"
    ).fetchall()
    assert len(same) == 2 and all(s[0] for s in same)


def test_delete_document_retires_and_keeps_rows(conn):
    conn.execute("SELECT rag.create_tenant('del')")
    ingest(conn, "del", "a.md", "# Heading\n\nSome unique zebra content here.\n")
    cid = conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'del'").fetchone()[0]
    assert conn.execute("SELECT rag.delete_document('del', 'a.md')").fetchone()[0] is True
    assert conn.execute("SELECT rag.delete_document('del', 'a.md')").fetchone()[0] is False
    assert conn.execute("SELECT content FROM rag.chunk WHERE chunk_id = %s", (cid,)).fetchone()[0]
    hits = conn.execute("SELECT count(*) FROM rag.retrieve('zebra content', 'del')").fetchone()[0]
    assert hits == 0
    again = ingest(conn, "del", "a.md", "# Heading\n\nSome unique zebra content here.\n")
    assert again[1:3] == (2, "inserted")


def test_chunks_are_immutable(conn):
    cid = conn.execute("SELECT min(chunk_id) FROM rag.chunk WHERE tenant = 'tiny'").fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        conn.execute("UPDATE rag.chunk SET content = 'changed' WHERE chunk_id = %s", (cid,))
    assert sqlstate_of(e) == "42501"
    conn.rollback()
    with pytest.raises(psycopg.Error) as e:
        conn.execute("DELETE FROM rag.chunk WHERE chunk_id = %s", (cid,))
    assert sqlstate_of(e) == "42501"


def test_chunkers_callable_from_sql(conn):
    rows = conn.execute(
        "SELECT anchor, title, content FROM rag.chunk_markdown(%s)",
        ("# Install It\n\nRun make.\n\n## Then\n\nAsk.\n",),
    ).fetchall()
    assert [r[0] for r in rows] == ["install-it", "then"]
    text = " ".join(f"word{i}" for i in range(2000))
    parts = conn.execute("SELECT content FROM rag.chunk_text(%s, 64, 8)", (text,)).fetchall()
    assert len(parts) > 10
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM rag.chunk_text('x', 1000, 0)")
    assert sqlstate_of(e) == "22023"


BAD_INPUTS = [
    ("empty", dict(body=""), "22023"),
    ("whitespace", dict(body="  \n\t  "), "22023"),
    ("binary", dict(body="".join(chr(c) for c in range(1, 32)) * 50), "22P02"),
    ("unknown tenant", dict(tenant="nope"), "42704"),
    ("null key", dict(key=None), "22004"),
    ("unknown format", dict(fmt="pdf"), "22023"),
    (
        "html format for plain text",
        dict(body="just some words without any markup at all", fmt="html"),
        "22023",
    ),
]


@pytest.mark.parametrize("name,override,sqlstate", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected_and_changes_nothing(conn, name, override, sqlstate):
    args = {"tenant": "tiny", "key": "bad-doc", "body": "# Title\n\nGood text.\n", "fmt": "auto", **override}
    before = counts(conn, "tiny")
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM rag.ingest(%(tenant)s, %(key)s, %(body)s, %(fmt)s)", args)
    assert sqlstate_of(e) == sqlstate, e.value
    conn.rollback()
    assert counts(conn, "tiny") == before


def test_oversized_document_is_rejected(conn):
    body = "<html><body><p>" + ("word " * 10_500_000) + "</p></body></html>"  # ~52 MB
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM rag.ingest('tiny', 'huge.html', %s)", (body,))
    assert sqlstate_of(e) == "54000"
    assert "max_document_bytes" in e.value.diag.message_hint


def test_malformed_html_recovers(conn):
    conn.execute("SELECT rag.create_tenant('mal')")
    body = "<html><body><div class='sect1' id='X'><h2>Broken<p>Unclosed paragraph about autovacuum <b>bold"
    row = ingest(conn, "mal", "broken.html", body, "html")
    assert row[2] == "inserted" and row[3] >= 1
    content = conn.execute("SELECT string_agg(content, ' ') FROM rag.chunk WHERE tenant = 'mal'").fetchone()[
        0
    ]
    assert "Unclosed paragraph about autovacuum" in content


def test_model_mismatch_is_refused(conn):
    conn.execute("SELECT rag.create_tenant('mm')")
    ingest(conn, "mm", "a.md", "# A\n\nFirst document.\n")
    conn.execute("SELECT rag.set_config('model', 'some/other-model')")
    with pytest.raises(psycopg.Error) as e:
        ingest(conn, "mm", "b.md", "# B\n\nSecond document.\n")
    assert sqlstate_of(e) == "55000"


def test_concurrent_ingest_of_one_key_never_interleaves(pg, db):
    with psycopg.connect(pg.dsn(db), autocommit=True) as c:
        c.execute("SELECT rag.create_tenant('conc')")
    bodies = [
        f"# Part {i}\n\n" + "\n\n".join(f"## S{j}\n\nVersion {i} section {j}." for j in range(5))
        for i in range(2)
    ]
    errors = []

    def worker(body):
        try:
            with psycopg.connect(pg.dsn(db), autocommit=True) as c:
                c.execute("SELECT * FROM rag.ingest('conc', 'same-key', %s)", (body,))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(pg.dsn(db), autocommit=True) as c:
        docs = c.execute(
            "SELECT version, retired_at IS NULL FROM rag.document WHERE tenant = 'conc' ORDER BY version"
        ).fetchall()
        assert docs == [(1, False), (2, True)]
        per_version = c.execute(
            "SELECT doc_version, count(*), count(DISTINCT substring(content from 'Version ([0-9])'))"
            " FROM rag.chunk WHERE tenant = 'conc' AND content LIKE 'Version%%' GROUP BY 1 ORDER BY 1"
        ).fetchall()
        assert [(v, n, d) for v, n, d in per_version] == [(1, 5, 1), (2, 5, 1)]


def test_table_of_contents_page_is_recorded_empty(conn):
    conn.execute("SELECT rag.create_tenant('toc')")
    body = (MANUAL / "gin.html").read_text()  # the chapter page: only a table of contents
    assert conn.execute("SELECT count(*) FROM rag.chunk_html(%s)", (body,)).fetchone()[0] == 0
    row = ingest(conn, "toc", "gin.html", body, "html")
    assert row[2:4] == ("empty", 0) and row[4] >= 1
    assert ingest(conn, "toc", "gin.html", body, "html")[2] == "unchanged"
