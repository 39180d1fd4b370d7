"""Tenant isolation with real non-superuser roles, and the append-only, hash-chained audit log."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from conftest import sqlstate_of

SECRET = "The launch code of tenant bravo is pelican-orange-42 and only bravo may read it."


@pytest.fixture
def two_tenants(conn):
    """alpha (role ra) and bravo (role rb), each with its own corpus; rolled back after the test."""
    sfx = uuid.uuid4().hex[:6]
    ra, rb = f"ra_{sfx}", f"rb_{sfx}"
    conn.execute(f"CREATE ROLE {ra} LOGIN IN ROLE pgcite_writer")
    conn.execute(f"CREATE ROLE {rb} LOGIN IN ROLE pgcite_writer")
    for tenant, role in (("alpha", ra), ("bravo", rb)):
        conn.execute("SELECT rag.create_tenant(%s)", (tenant,))
        conn.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, role))
    conn.execute(
        "SELECT * FROM rag.ingest('alpha', 'a.md', %s)",
        ("# Alpha notes\n\nThe alpha team vacuums its tables every night.\n",),
    )
    conn.execute("SELECT * FROM rag.ingest('bravo', 'b.md', %s)", (f"# Bravo secrets\n\n{SECRET}\n",))
    yield ra, rb  # the conn fixture rolls back: roles, tenants and SET ROLE are undone


def as_role(conn, role):
    conn.execute(f"SET ROLE {role}")


def test_member_never_sees_other_tenant(conn, two_tenants):
    ra, rb = two_tenants
    as_role(conn, ra)
    # verbatim text of bravo's document, asked of alpha: nothing of bravo comes back
    a = conn.execute("SELECT status, citations, evidence FROM rag.ask(%s, 'alpha')", (SECRET,)).fetchone()
    ids = [c["chunk_id"] for c in a[2]["chunks"]]
    bravo_ids = set()
    conn.execute("RESET ROLE")
    bravo_ids = {r[0] for r in conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'bravo'")}
    as_role(conn, ra)
    assert not bravo_ids & set(ids)
    assert "pelican" not in json.dumps(a[1])
    # direct reads go through row level security
    # (other tests may grant tenants to pgcite_writer, which ra belongs to: those are legitimately visible)
    member_of = {r[0] for r in conn.execute("SELECT tenant FROM rag.tenant")}
    assert "alpha" in member_of and "bravo" not in member_of and "tiny" not in member_of
    assert {r[0] for r in conn.execute("SELECT DISTINCT tenant FROM rag.chunk")} <= member_of
    assert conn.execute("SELECT count(*) FROM rag.chunk WHERE content LIKE '%pelican%'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM rag.ask_log WHERE tenant = 'bravo'").fetchone()[0] == 0


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM rag.ask('launch code', 'bravo')",
        "SELECT * FROM rag.retrieve('launch code', 'bravo')",
        "SELECT * FROM rag.explain('launch code', 'bravo')",
        "SELECT * FROM rag.verify_log('bravo')",
        "SELECT * FROM rag.ingest('bravo', 'x.md', '# X\n\ntext')",
        "SELECT rag.delete_document('bravo', 'b.md')",
    ],
)
def test_non_member_gets_42501(conn, two_tenants, sql):
    ra, _ = two_tenants
    as_role(conn, ra)
    with pytest.raises(psycopg.Error) as e:
        conn.execute(sql)
    assert sqlstate_of(e) == "42501"


def test_cannot_cite_or_replay_other_tenant(conn, two_tenants):
    ra, rb = two_tenants
    as_role(conn, rb)
    b = conn.execute("SELECT ask_id, citations FROM rag.ask('What is the launch code?', 'bravo')").fetchone()
    conn.execute("RESET ROLE")
    bravo_chunk = conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'bravo'").fetchone()[0]
    as_role(conn, ra)
    conn.execute("SAVEPOINT s")
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM rag.replay(%s)", (b[0],))
    assert sqlstate_of(e) == "42704"
    conn.execute("ROLLBACK TO SAVEPOINT s")
    forged = [{"n": 1, "chunk_id": bravo_chunk, "quote": "pelican-orange-42"}]
    row = conn.execute(
        "SELECT status, reason FROM rag.verify('It is pelican-orange-42 [1]', %s, %s)",
        (json.dumps(forged), [bravo_chunk]),
    ).fetchone()
    assert row == ("abstained", "no_verifiable_quote")
    assert conn.execute("SELECT count(*) FROM rag.ask_log WHERE tenant = 'bravo'").fetchone()[0] == 0


def test_audit_log_is_append_only_and_chained(conn, two_tenants):
    ra, _ = two_tenants
    as_role(conn, ra)
    ids = [
        conn.execute("SELECT ask_id FROM rag.ask(%s, 'alpha')", (q,)).fetchone()[0]
        for q in ("When does alpha vacuum?", "What is the capital of Australia?", "")
    ]
    assert all(ids)
    assert conn.execute("SELECT ok, checked FROM rag.verify_log('alpha')").fetchone() == (True, 3)
    rows = conn.execute("SELECT seq, role_name, status FROM rag.ask_log WHERE tenant = 'alpha' ORDER BY seq")
    assert [(r[0], r[1]) for r in rows.fetchall()] == [(1, ra), (2, ra), (3, ra)]
    for sql in ("UPDATE rag.ask_log SET answer = 'x'", "DELETE FROM rag.ask_log"):
        conn.execute("SAVEPOINT s")
        with pytest.raises(psycopg.Error) as e:
            conn.execute(sql)
        assert sqlstate_of(e) == "42501"
        conn.execute("ROLLBACK TO SAVEPOINT s")
    # a superuser who bypasses the trigger to edit history is caught by the chain
    conn.execute("RESET ROLE")
    conn.execute("ALTER TABLE rag.ask_log DISABLE TRIGGER ask_log_append_only")
    conn.execute("UPDATE rag.ask_log SET answer = 'forged' WHERE ask_id = %s", (ids[0],))
    conn.execute("ALTER TABLE rag.ask_log ENABLE TRIGGER ask_log_append_only")
    assert conn.execute("SELECT ok, first_bad_ask_id FROM rag.verify_log('alpha')").fetchone() == (
        False,
        ids[0],
    )


def test_replay_is_identical_while_corpus_unchanged(conn, two_tenants):
    ra, _ = two_tenants
    as_role(conn, ra)
    ask_id = conn.execute(
        "SELECT ask_id FROM rag.ask('When does the alpha team vacuum?', 'alpha')"
    ).fetchone()[0]
    r = conn.execute("SELECT identical, fingerprint_then = fingerprint_now FROM rag.replay(%s)", (ask_id,))
    assert r.fetchone() == (True, True)
    conn.execute(
        "SELECT * FROM rag.ingest('alpha', 'a2.md', '# More alpha\n\nThe alpha team vacuums at noon too.')"
    )
    r = conn.execute("SELECT identical FROM rag.replay(%s)", (ask_id,)).fetchone()
    assert r == (False,)


GERMAN = (
    "# Größe einer Tabelle ändern\n\nMit ALTER TABLE ändert man die Größe und die Spalten einer Tabelle. "
    "Die Größe einer Spalte ändert man mit ALTER COLUMN ... TYPE.\n\n# Übersicht über Indizes\n\n"
    "Ein Index beschleunigt Abfragen. Größere Tabellen profitieren mehr von einem Index als kleine Tabellen."
    "\n\n# Schlüssel und Fremdschlüssel\n\nEin Fremdschlüssel verweist auf den Primärschlüssel einer "
    "anderen Tabelle. Änderungen werden geprüft.\n"
)


def test_questions_with_non_ascii_letters_are_read_with_them_and_replay_identically(conn):
    """The question is read in the database's collation, in which regular expressions and lower() take "ö"
    or "Ü" for letters, as the chunks' stored words were read: in collation "C" (which the entry points'
    `name` argument gave every text argument until 0.9.0's session 17) "Größe" was the words "Gr" and "e",
    and five of these six questions abstained. rag.replay answers the logged question in the same collation,
    so each replay is identical (it once ran in another collation than rag.ask and answered questions
    rag.ask abstained on)."""
    role = "de_reader_" + uuid.uuid4().hex[:6]
    conn.execute("SELECT rag.create_tenant('de_replay', 'german')")
    conn.execute("SELECT * FROM rag.ingest('de_replay', 'tabelle.md', %s)", (GERMAN,))
    conn.execute(f"CREATE ROLE {role} IN ROLE pgcite_reader")
    conn.execute("SELECT rag.grant_tenant('de_replay', %s)", (role,))
    as_role(conn, role)
    expected = {  # question -> words its answer's quote must hold
        "Wie ändere ich die Größe einer Tabelle?": "ALTER TABLE ändert man die Größe",
        "Wie ändert man die Grösse einer Spalte?": "ALTER TABLE ändert man die Größe",
        "Was ist ein Fremdschlüssel?": "Ein Fremdschlüssel verweist auf den Primärschlüssel",
        "Welche Tabellen profitieren von einem Index?": "Größere Tabellen profitieren mehr von einem Index",
        "ÄNDERN der GRÖSSE einer Tabelle mit ALTER TABLE": "ALTER TABLE ändert man die Größe",
        "Was prüft ein Fremdschlüsel bei Änderungen?": "Fremdschlüssel",
    }
    for q, words in expected.items():
        ask_id, status, answer = conn.execute(
            "SELECT ask_id, status, answer FROM rag.ask(%s, 'de_replay')", (q,)
        ).fetchone()
        assert status == "answered" and words in answer, (q, status, answer)
        r = conn.execute(
            "SELECT identical, status_then, status_now, fingerprint_then = fingerprint_now, "
            "citations_identical FROM rag.replay(%s)",
            (ask_id,),
        ).fetchone()
        assert r[0] and r[1] == r[2] and r[3] and r[4], (q, r)


def test_reader_cannot_ingest(conn):
    sfx = uuid.uuid4().hex[:6]
    role = f"reader_{sfx}"
    conn.execute(f"CREATE ROLE {role} IN ROLE pgcite_reader")
    conn.execute("SELECT rag.grant_tenant('tiny', %s)", (role,))
    as_role(conn, role)
    assert conn.execute("SELECT status FROM rag.ask('What is a B-tree index?', 'tiny')").fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        conn.execute("SELECT * FROM rag.ingest('tiny', 'x.md', '# X\n\ntext')")
    assert sqlstate_of(e) == "42501"


def test_works_with_an_empty_search_path(conn, two_tenants):
    """Every reference is schema-qualified: nothing depends on the caller's search_path."""
    ra, _ = two_tenants
    as_role(conn, ra)
    conn.execute("SET LOCAL search_path = ''")
    row = conn.execute("SELECT status FROM rag.ask('When does the alpha team vacuum?', 'alpha')").fetchone()
    assert row[0] in ("answered", "abstained")
    assert conn.execute("SELECT count(*) FROM rag.retrieve('vacuum', 'alpha', 3)").fetchone()[0] == 1
    assert conn.execute("SELECT ok FROM rag.verify_log('alpha')").fetchone()[0] is True
