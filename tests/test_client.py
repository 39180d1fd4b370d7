"""The Python client against a real database: dataclasses, SQLSTATEs as exceptions, sync and async."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
from conftest import vector_values

from pgcite import (
    ERROR_CODES,
    Answer,
    AsyncClient,
    Citation,
    Client,
    ConnectionFailed,
    IngestResult,
    InvalidParameter,
    LimitExceeded,
    LocalModelUnavailable,
    ModelUnavailable,
    PermissionDenied,
    PgciteError,
    PythonEnvironmentMissing,
    RetrievedChunk,
    UnknownTenant,
    resolve_dsn,
    translate,
)
from pgcite.errors import CONDITION_NAMES

ROOT = Path(__file__).resolve().parents[1]
WRAP_Q = "How do I prevent transaction ID wraparound failures?"
OUT_Q = "What is the capital of Australia?"
MD = (
    "# Night jobs\n\nThe night team vacuums the orders table at two o'clock.\n\n"
    "## Backups\n\nBackups run at four.\n"
)


@pytest.fixture
def client(conn):
    """A client on the rolled-back test connection: every call runs under a savepoint."""
    return Client.from_connection(conn)


@pytest.fixture(scope="module")
def dsn(pg, db):
    return pg.dsn(db)


# ---------------------------------------------------------------------- error mapping (no database)
class FakeError(psycopg.DatabaseError):
    def __init__(self, sqlstate, message="boom", hint=None, detail=None):
        super().__init__(message)
        self._diag = SimpleNamespace(
            sqlstate=sqlstate, message_primary=message, message_hint=hint, message_detail=detail
        )

    @property
    def diag(self):
        return self._diag


@pytest.mark.parametrize(
    "code, cls",
    [
        ("42501", PermissionDenied),
        ("42704", UnknownTenant),
        ("22023", InvalidParameter),
        ("22004", InvalidParameter),
        ("22P02", InvalidParameter),
        ("54000", LimitExceeded),
        ("PC001", PythonEnvironmentMissing),
        ("PC002", ModelUnavailable),
        ("PC003", LocalModelUnavailable),
        ("08006", ConnectionFailed),
        ("XX000", PgciteError),
    ],
)
def test_translate_maps_sqlstates(code, cls):
    exc = FakeError(code, "m", hint="h", detail="d")
    err = translate(exc)
    assert type(err) is cls
    assert (err.sqlstate, err.message, err.hint, err.detail) == (code, "m", "h", "d")
    assert err.__cause__ is exc


def test_translate_client_side_errors():
    assert type(translate(psycopg.DataError("NUL byte"))) is InvalidParameter
    assert type(translate(psycopg.OperationalError("connection refused"))) is ConnectionFailed
    assert translate(psycopg.OperationalError("x")).sqlstate is None


def test_every_code_raised_in_sql_is_mapped():
    texts = [p.read_text() for p in [*(ROOT / "sql").rglob("*.sql"), *(ROOT / "python_udfs").rglob("*.py")]]
    raised = set()
    for text in texts:
        raised |= set(re.findall(r"ERRCODE\s*=\s*'([a-z0-9_]+)'", text, re.I))
        raised |= set(re.findall(r"sqlstate\s*=\s*[\"']([0-9A-Z]{5})[\"']", text))
    assert raised, "no RAISE found in sql/"
    for code in raised:
        assert code in ERROR_CODES or code.lower() in CONDITION_NAMES, code
    for code, entry in ERROR_CODES.items():
        assert issubclass(entry.exception, PgciteError) and entry.meaning, code
    documented = (ROOT / "docs" / "errors.md").read_text()
    for code in raised:
        sqlstate = code if code in ERROR_CODES else CONDITION_NAMES[code.lower()]
        assert f"`{sqlstate}`" in documented, f"{code} is not in docs/errors.md"


# ---------------------------------------------------------------------- DSN
def test_resolve_dsn_order(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "dbname=from_env")
    assert resolve_dsn("dbname=given") == "dbname=given"
    assert resolve_dsn() == "dbname=from_env"
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setenv("PGCITE_HOME", str(tmp_path / "nothing-here"))
    with pytest.raises(ConnectionFailed) as ei:
        resolve_dsn()
    assert "pgcite up" in ei.value.hint


def test_unreachable_server_is_connection_failed():
    with pytest.raises(ConnectionFailed):
        Client("host=127.0.0.1 port=1 dbname=x connect_timeout=2")


# ---------------------------------------------------------------------- real SQLSTATEs
@pytest.mark.parametrize(
    "call, cls, sqlstate",
    [
        (lambda c: c.retrieve("vacuum", "no_such_tenant"), UnknownTenant, "42704"),
        (lambda c: c.ask("vacuum", "no_such_tenant"), UnknownTenant, "42704"),
        (lambda c: c.retrieve("vacuum", "tiny", k=0), InvalidParameter, "22023"),
        (lambda c: c.ask("vacuum", "tiny", k=101), InvalidParameter, "22023"),
        (lambda c: c.ask("vacuum", "tiny", query_embedding=[0.1, 0.2, 0.3]), InvalidParameter, "22023"),
        (lambda c: c.ask("x" * 4001, "tiny"), LimitExceeded, "54000"),
        (lambda c: c.ingest("tiny", "x.md", "# X\n\nx", format="pdf"), InvalidParameter, "22023"),
        (lambda c: c.ingest("tiny", None, "# X\n\nx"), InvalidParameter, "22004"),
        (lambda c: c.ingest("tiny", "nul.txt", "a\x00b"), InvalidParameter, None),  # refused by psycopg
        (lambda c: c.create_tenant("bad name!"), InvalidParameter, "22023"),
    ],
)
def test_errors_carry_sqlstate_and_class(client, call, cls, sqlstate):
    with pytest.raises(cls) as ei:
        call(client)
    assert ei.value.sqlstate == sqlstate
    # the savepoint kept the caller's transaction usable
    assert client.retrieve("vacuum", "tiny", k=1)[0].rank == 1


def test_hint_is_passed_on(client):
    with pytest.raises(UnknownTenant) as ei:
        client.retrieve("vacuum", "no_such_tenant")
    assert "rag.create_tenant" in (ei.value.hint or "")


def test_non_member_gets_permission_denied(conn, client):
    role = f"pgcite_test_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE ROLE "{role}" NOLOGIN IN ROLE pgcite_reader')
    conn.execute(f'SET LOCAL ROLE "{role}"')
    with pytest.raises(PermissionDenied) as ei:
        client.ask(WRAP_Q, "tiny")
    assert ei.value.sqlstate == "42501"
    conn.execute("RESET ROLE")
    client.grant_tenant("tiny", role)
    conn.execute(f'SET LOCAL ROLE "{role}"')
    assert client.retrieve(WRAP_Q, "tiny", k=1)[0].doc_key == "routine-vacuuming.html"
    conn.execute("RESET ROLE")
    assert client.revoke_tenant("tiny", role) is True


def test_missing_db_python_environment(dsn):
    with Client(dsn) as c:  # a new backend, and a superuser's setting, rolled back
        c.connection.autocommit = False
        c.connection.execute("SELECT rag.set_config('python_path', '/nonexistent/pgcite-venv')")
        with pytest.raises(PythonEnvironmentMissing) as ei:
            c.retrieve("vacuum", "tiny")
        c.connection.rollback()
    assert ei.value.sqlstate == "PC001" and ei.value.hint


# ---------------------------------------------------------------------- documents
def test_ingest_new_tenant_then_unchanged(client):
    tenant = f"t_{uuid.uuid4().hex[:8]}"
    assert client.create_tenant(tenant) == tenant
    assert client.create_tenant(tenant) == tenant  # idempotent
    first = client.ingest(tenant, "night.md", MD, metadata={"team": "night"})
    assert isinstance(first, IngestResult)
    assert (first.doc_key, first.version, first.status) == ("night.md", 1, "inserted")
    assert first.chunks >= 1
    again = client.ingest(tenant, "night.md", MD, metadata={"team": "night"})
    assert (again.status, again.version, again.chunks) == ("unchanged", 1, first.chunks)
    hits = client.retrieve("When are the orders vacuumed?", tenant, k=3)
    assert hits and all(isinstance(h, RetrievedChunk) for h in hits)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert hits[0].doc_key == "night.md" and "vacuums the orders" in hits[0].content
    assert client.delete_document(tenant, "night.md") is True
    assert client.delete_document(tenant, "night.md") is False
    assert client.retrieve("When are the orders vacuumed?", tenant) == []


# ---------------------------------------------------------------------- questions
def test_ask_answers_with_typed_citations(client, conn):
    a = client.ask(WRAP_Q, "tiny")
    assert isinstance(a, Answer) and a.answered, a.gate
    assert a.ask_id is not None and a.fingerprint
    assert a.citations and all(isinstance(c, Citation) for c in a.citations)
    assert [c.n for c in a.citations] == sorted(c.n for c in a.citations)
    first = a.citations[0]
    assert first.anchor == "VACUUM-FOR-WRAPAROUND" and first.verified
    content = conn.execute("SELECT content FROM rag.chunk WHERE chunk_id = %s", (first.chunk_id,)).fetchone()[
        0
    ]
    assert content[first.quote_start : first.quote_end] == first.quote
    assert first.source_url == "https://www.postgresql.org/docs/15/routine-vacuuming.html"
    assert a.chunks and a.chunks[0]["rank"] == 1
    assert a.to_dict()["citations"][0]["n"] == first.n


def test_ask_abstains(client):
    a = client.ask(OUT_Q, "tiny")
    assert (a.status, a.answered, a.reason, a.answer, a.citations) == (
        "abstained",
        False,
        "no_relevant_sources",
        None,
        [],
    )
    assert a.gate.get("failed")


def test_query_embedding_list_gives_same_answer(client, conn):
    text = conn.execute("SELECT rag.embed(%s)::text", (WRAP_Q,)).fetchone()[0]
    emb = vector_values(text)
    with_emb = client.ask(WRAP_Q, "tiny", query_embedding=emb)
    without = client.ask(WRAP_Q, "tiny")
    assert with_emb.fingerprint == without.fingerprint
    assert [c.chunk_id for c in with_emb.citations] == [c.chunk_id for c in without.citations]
    assert [h.chunk_id for h in client.retrieve(WRAP_Q, "tiny", query_embedding=tuple(emb))] == [
        h.chunk_id for h in client.retrieve(WRAP_Q, "tiny")
    ]


def test_replay_and_verify_log(client):
    a = client.ask(WRAP_Q, "tiny")
    r = client.replay(a.ask_id)
    assert r.ask_id == a.ask_id and r.identical
    assert r.fingerprint_then == r.fingerprint_now == a.fingerprint
    v = client.verify_log("tiny")
    assert v.ok and v.checked >= 1 and v.first_bad_ask_id is None


def test_explain_rows(client):
    rows = client.explain(WRAP_Q, "tiny", k=3)
    assert rows and isinstance(rows[0], dict)


def test_calibrate_returns_a_table(client):
    questions = [
        {"id": "c1", "question": WRAP_Q, "expect": ["VACUUM-FOR-WRAPAROUND"], "kind": "answerable"},
        {"id": "c2", "question": OUT_Q, "expect": [], "kind": "out_of_corpus"},
    ]
    rows = client.calibrate("tiny", questions)  # rolled back with the test's transaction
    assert rows and isinstance(rows[0], dict)
    assert "c1" in client.tenant_gate("tiny").get("calibrated_on", [])


def test_own_connection_autocommits_and_closes(dsn):
    with Client(dsn) as c:
        assert c.connection.autocommit
        status = c.server_status()
        assert status["extensions"]["pgcite"] and status["tenants"] >= 1 and status["chunks"] > 0
    assert c.connection.closed


def test_async_client(dsn):
    async def go():
        async with await AsyncClient.connect(dsn) as c:
            answered = await c.ask(WRAP_Q, "tiny")
            abstained = await c.ask(OUT_Q, "tiny")
            hits = await c.retrieve(WRAP_Q, "tiny", k=2)
            with pytest.raises(UnknownTenant):
                await c.ask("x", "no_such_tenant")
            log = await c.verify_log("tiny")
            return answered, abstained, hits, log

    answered, abstained, hits, log = asyncio.run(go())
    assert answered.answered and answered.citations[0].anchor == "VACUUM-FOR-WRAPAROUND"
    assert abstained.status == "abstained"
    assert [h.rank for h in hits] == [1, 2]
    assert log.ok


def test_async_client_on_a_transaction_keeps_it_usable(dsn):
    async def go():
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            c = await AsyncClient.from_connection(conn)
            with pytest.raises(InvalidParameter):
                await c.retrieve("vacuum", "tiny", k=0)
            hits = await c.retrieve("vacuum", "tiny", k=1)
            await conn.rollback()
            return hits

    assert len(asyncio.run(go())) == 1
