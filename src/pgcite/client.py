"""Python client for pgcite: `Client` (psycopg Connection) and `AsyncClient` (psycopg AsyncConnection).

Both call the same SQL functions of schema `rag` with the same arguments (see `_Q`), return the dataclasses
of `pgcite.types`, and turn every psycopg error into a `pgcite.errors.PgciteError` subclass.

A client that opens its own connection runs it in autocommit mode: every call is its own transaction
(rag.ingest of one document is atomic; rag.ask commits its audit-log entry). A client given an existing
connection leaves transaction control to its owner; if that connection is inside a transaction, each call
runs under a savepoint so that a failed call does not abort the owner's transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

import psycopg
from pgvector import Vector
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .errors import ConnectionFailed, InvalidParameter, NotReady, PgciteError, translate
from .types import Answer, IngestResult, LogVerification, ReplayResult, RetrievedChunk

Params = Sequence[Any] | Mapping[str, Any] | None
Row = dict[str, Any]
EmbeddingLike = Vector | Sequence[float] | Any  # list, tuple, numpy array or pgvector.Vector
# Your own generator (Client.ask(generate=...)): gets the request {"messages": [...], "response_format":
# {...}} pgcite would send to a chat-completions endpoint, returns the model's reply: its raw text or the
# CitedAnswer as a dict. An exception means the generator failed (the answer abstains with
# generator_unavailable).
Generate = Callable[[dict[str, Any]], "str | Mapping[str, Any]"]
AsyncGenerate = Callable[[dict[str, Any]], "str | Mapping[str, Any] | Awaitable[str | Mapping[str, Any]]"]

APPLICATION_NAME = "pgcite"
PGCITE_EXTENSIONS = ("pgcite", "pgcite_python", "vector", "pg_trgm", "fuzzystrmatch", "plpython3u")


def resolve_dsn(dsn: str | None = None) -> str:
    """The DSN to use: the argument, else $DATABASE_URL, else the running embedded cluster (`pgcite up`)."""
    if dsn:
        return dsn
    env = os.environ.get("DATABASE_URL")
    if env:
        return env
    from .cluster import Cluster, ClusterError, default_home

    cluster = Cluster(default_home())
    try:
        if cluster.running():
            return cluster.dsn()
    except (ClusterError, OSError, subprocess.SubprocessError) as exc:
        raise ConnectionFailed(
            f"cannot check the embedded cluster at {cluster.home}: {exc}",
            hint="Pass --dsn or set DATABASE_URL.",
        ) from exc
    raise ConnectionFailed(
        f"no database given and no embedded cluster running at {cluster.home}",
        hint="Pass --dsn, set DATABASE_URL, or start a private cluster with `pgcite up` (PGCITE_HOME).",
    )


def _embedding_param(value: EmbeddingLike | None, registered: bool) -> Any:
    """A query embedding as a parameter for `%s::public.vector`."""
    if value is None:
        return None
    if isinstance(value, Vector):
        vec = value
    else:
        items = value.tolist() if hasattr(value, "tolist") else value
        try:
            vec = Vector([float(x) for x in items])
        except (TypeError, ValueError) as exc:
            raise PgciteError(f"query_embedding must be a sequence of numbers: {exc}") from exc
    if registered:
        return vec
    return vec.to_text()  # no adapter (vector type not found at connect): let the cast parse the text


CLIENT_SIDE_CHOICES = (None, True, False)


def _check_client_side(value: Any) -> bool | None:
    if value not in CLIENT_SIDE_CHOICES or not (value is None or isinstance(value, bool)):
        raise InvalidParameter(
            f"client_side must be None (where the server cannot), True or False, not {value!r}",
            sqlstate="22023",
        )
    return value


def _blank(question: str | None) -> bool:
    """rag._check_question's empty question: nothing to embed (rag.ask abstains with empty_question)."""
    return question is None or not question.strip(" \t\n\r\f\v")


class _Plan:
    """Where a client parses and embeds: in the server (rag.ingest, rag.embed) or in this process
    (pgcite.local), from what the server has (_Q.CAPABILITIES) and the client's `client_side` (None: in the
    client only what the server cannot do)."""

    def __init__(self, caps: Row, client_side: bool | None) -> None:
        self.caps = dict(caps)
        self.ingest_locally = client_side is True or (client_side is None and not caps["ingest"])
        self.embed_locally = client_side is True or (client_side is None and not caps["embed"])
        self.ingest_error: PgciteError | None = None
        if self.ingest_locally and not caps["store_parsed"]:
            self.ingest_error = NotReady(
                "this database's pgcite has no rag.store_parsed (older than 0.5.0): the client cannot store "
                "the documents it parses",
                sqlstate="55000",
                hint="Upgrade pgcite in the database: pgcite install, or ALTER EXTENSION pgcite UPDATE.",
            )

    def ingest_pipeline(self):
        if self.ingest_error is not None:
            raise self.ingest_error
        return self.pipeline()

    @property
    def local(self) -> bool:
        return self.ingest_locally or self.embed_locally

    def pipeline(self):
        """The local pipeline (PC003 without the local extra), checked against the server's model (55000)."""
        from .local import check_model, shared_pipeline

        check_model(self.caps.get("model"))
        return shared_pipeline()


class _Q:
    """The SQL of every call, shared by Client and AsyncClient: (sql, params)."""

    @staticmethod
    def create_tenant(tenant: str, ts_config: str | None) -> tuple[str, Params]:
        if ts_config is None:
            return "SELECT rag.create_tenant(%s) AS tenant", (tenant,)
        return "SELECT rag.create_tenant(%s, %s::regconfig) AS tenant", (tenant, ts_config)

    @staticmethod
    def grant_tenant(tenant: str, role: str) -> tuple[str, Params]:
        return "SELECT rag.grant_tenant(%s, %s::regrole)", (tenant, role)

    @staticmethod
    def revoke_tenant(tenant: str, role: str) -> tuple[str, Params]:
        return "SELECT rag.revoke_tenant(%s, %s::regrole) AS revoked", (tenant, role)

    @staticmethod
    def ingest(
        tenant: str,
        doc_key: str,
        body: str,
        format: str,
        title: str | None,
        source_url: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> tuple[str, Params]:
        return (
            "SELECT * FROM rag.ingest(%s, %s, %s, %s, %s, %s, %s::jsonb)",
            (tenant, doc_key, body, format, title, source_url, Jsonb(dict(metadata or {}))),
        )

    @staticmethod
    def document_unchanged(
        tenant: str,
        doc_key: str,
        body: str,
        format: str,
        chunker_version: int,
        title: str | None,
        source_url: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> tuple[str, Params]:
        return (
            "SELECT * FROM rag.document_unchanged(%s, %s, %s, %s, %s, %s, %s, %s::jsonb)",
            (tenant, doc_key, body, format, chunker_version, title, source_url, Jsonb(dict(metadata or {}))),
        )

    @staticmethod
    def store_parsed(
        tenant: str,
        doc_key: str,
        body: str,
        format: str,
        parsed: Mapping[str, Any],
        title: str | None,
        source_url: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> tuple[str, Params]:
        return (
            "SELECT * FROM rag.store_parsed(%s, %s, %s, %s, %s::jsonb, %s, %s, %s::jsonb)",
            (tenant, doc_key, body, format, Jsonb(parsed), title, source_url, Jsonb(dict(metadata or {}))),
        )

    @staticmethod
    def embedded_texts(tenant: str, hashes: Sequence[bytes]) -> tuple[str, Params]:
        return "SELECT content_hash FROM rag.embedded_texts(%s, %s::bytea[])", (tenant, list(hashes))

    @staticmethod
    def correct_question(question: str, tenant: str) -> tuple[str, Params]:
        return "SELECT rag.correct_question(%s, %s) AS corrected", (question, tenant)

    @staticmethod
    def delete_document(tenant: str, doc_key: str) -> tuple[str, Params]:
        return "SELECT rag.delete_document(%s, %s) AS deleted", (tenant, doc_key)

    @staticmethod
    def retrieve(question: str, tenant: str, k: int, qemb: Any) -> tuple[str, Params]:
        return "SELECT * FROM rag.retrieve(%s, %s, %s, %s::public.vector)", (question, tenant, k, qemb)

    @staticmethod
    def ask(
        question: str, tenant: str, k: int, qemb: Any, options: Mapping[str, Any] | None
    ) -> tuple[str, Params]:
        return (
            "SELECT * FROM rag.ask(%s, %s, %s, %s::public.vector, %s::jsonb)",
            (question, tenant, k, qemb, Jsonb(dict(options or {}))),
        )

    @staticmethod
    def context(
        question: str, tenant: str, k: int, qemb: Any, options: Mapping[str, Any] | None
    ) -> tuple[str, Params]:
        return (
            "SELECT * FROM rag.context(%s, %s, %s, %s::public.vector, %s::jsonb)",
            (question, tenant, k, qemb, Jsonb(dict(options or {}))),
        )

    @staticmethod
    def answer(context_id: int, reply: Any, generator: str | None, error: str | None) -> tuple[str, Params]:
        return (
            "SELECT * FROM rag.answer(%s, %s::jsonb, %s, %s)",
            (context_id, None if reply is None else Jsonb(reply), generator, error),
        )

    @staticmethod
    def explain(question: str, tenant: str, k: int, qemb: Any) -> tuple[str, Params]:
        return "SELECT * FROM rag.explain(%s, %s, %s, %s::public.vector)", (question, tenant, k, qemb)

    @staticmethod
    def calibrate(tenant: str, questions: Sequence[Mapping[str, Any]]) -> tuple[str, Params]:
        return "SELECT * FROM rag.calibrate(%s, %s::jsonb)", (tenant, Jsonb([dict(q) for q in questions]))

    @staticmethod
    def replay(ask_id: int) -> tuple[str, Params]:
        return "SELECT * FROM rag.replay(%s)", (ask_id,)

    @staticmethod
    def verify_log(tenant: str) -> tuple[str, Params]:
        return "SELECT * FROM rag.verify_log(%s)", (tenant,)

    @staticmethod
    def tenant_gate(tenant: str) -> tuple[str, Params]:
        return "SELECT gate FROM rag.tenant WHERE tenant = %s", (tenant,)

    # what the server does itself: parse and embed documents (rag.ingest), embed questions (rag.embed)
    CAPABILITIES = (
        "SELECT to_regprocedure('rag.ingest(text,text,text,text,text,text,jsonb)') IS NOT NULL AS ingest,"
        " to_regprocedure('rag.embed(text)') IS NOT NULL AS embed,"
        " to_regprocedure('rag.store_parsed(text,text,text,text,jsonb,text,text,jsonb)') IS NOT NULL"
        " AND to_regprocedure('rag.embedded_texts(text,bytea[])') IS NOT NULL AS store_parsed",
        None,
    )
    MODEL = ("SELECT rag.model_name() AS model", None)
    EXTENSIONS = (
        "SELECT extname, extversion FROM pg_catalog.pg_extension WHERE extname = ANY(%s) ORDER BY extname",
        (list(PGCITE_EXTENSIONS),),
    )
    SERVER = (
        "SELECT current_database() AS database, current_user AS role,"
        " current_setting('server_version') AS server_version,"
        " to_regclass('rag.chunk') IS NOT NULL AS has_schema",
        None,
    )
    COUNTS = (
        "SELECT (SELECT count(*) FROM rag.tenant) AS tenants,"
        " (SELECT count(*) FROM rag.document WHERE retired_at IS NULL) AS documents,"
        " (SELECT count(*) FROM rag.chunk WHERE retired_at IS NULL) AS chunks,"
        " (SELECT count(*) FROM rag.ask_log) AS asks",
        None,
    )


def _context_answer(ctx: Row) -> Answer:
    """The Answer of a rag.context row that needs no generator (the gate refused; already logged)."""
    return Answer.from_row(
        {
            "ask_id": ctx.get("ask_id"),
            "status": ctx["status"],
            "answer": None,
            "reason": ctx.get("reason"),
            "citations": [],
            "evidence": ctx.get("evidence") or {},
        }
    )


def _reply_param(reply: Any) -> Any:
    """A generator's reply as rag.answer takes it: a dict as the JSON object, anything else as its text."""
    if isinstance(reply, Mapping):
        return dict(reply)
    if isinstance(reply, bytes):
        return reply.decode("utf-8", errors="replace")
    return str(reply)


def _generator_name(generate: Any, name: str | None) -> str | None:
    return name or getattr(generate, "__name__", None) or type(generate).__name__


def _one(rows: list[Row], what: str) -> Row:
    if not rows:
        raise PgciteError(f"{what} returned no row")
    return rows[0]


def _status(server: Row, extensions: list[Row], counts: Row | None) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in server.items() if k != "has_schema"}
    out["extensions"] = {r["extname"]: r["extversion"] for r in extensions}
    out.update(counts or {"tenants": None, "documents": None, "chunks": None, "asks": None})
    return out


class Client:
    """Synchronous pgcite client.

    >>> with Client("dbname=pgcite") as c:
    ...     a = c.ask("How do I prevent transaction ID wraparound?", tenant="docs")
    ...     print(a.answer if a.answered else a.reason)
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        connection: psycopg.Connection | None = None,
        connect_timeout: int = 10,
        client_side: bool | None = None,
    ) -> None:
        self.client_side = _check_client_side(client_side)
        self._plan_cache: _Plan | None = None
        if connection is not None:
            self._conn = connection
            self._owns = False
            self.dsn: str | None = None
        else:
            self.dsn = resolve_dsn(dsn)
            try:
                self._conn = psycopg.connect(
                    self.dsn,
                    autocommit=True,
                    connect_timeout=connect_timeout,
                    application_name=APPLICATION_NAME,
                )
            except psycopg.Error as exc:
                raise translate(exc) from exc
            self._owns = True
        self._vector = self._register_vector()

    @classmethod
    def from_connection(cls, connection: psycopg.Connection, *, client_side: bool | None = None) -> Client:
        """A client on a connection you own (and commit, roll back and close yourself)."""
        return cls(connection=connection, client_side=client_side)

    def plan(self) -> _Plan:
        """Where documents are parsed and questions embedded (asked of the server once per client)."""
        if self._plan_cache is None:
            plan = _Plan(_one(self._fetch(*_Q.CAPABILITIES), "capabilities"), self.client_side)
            if plan.local:  # the model the client must embed with (only asked when it will)
                plan.caps["model"] = _one(self._fetch(*_Q.MODEL), "rag.model_name")["model"]
            self._plan_cache = plan
        return self._plan_cache

    def check_client_side(self) -> bool:
        """True when ingest parses and embeds in this client; then PC003 without the local extra, 55000 when
        the models differ or the server cannot store parsed documents, before any document is read."""
        plan = self.plan()
        if plan.ingest_locally:
            plan.ingest_pipeline()
        return plan.ingest_locally

    def _register_vector(self) -> bool:
        from pgvector.psycopg import register_vector

        try:
            with self._guard():
                register_vector(self._conn)
        except (psycopg.ProgrammingError, PgciteError):
            return False  # no vector type here: embeddings are sent as text
        return True

    @property
    def connection(self) -> psycopg.Connection:
        return self._conn

    # ------------------------------------------------------------------ plumbing
    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Savepoint around a call on a connection inside its owner's transaction; errors translated."""
        conn = self._conn
        savepoint = not conn.autocommit
        try:
            if savepoint:
                conn.execute("SAVEPOINT pgcite_call")
            try:
                yield
            except psycopg.Error:
                if savepoint and not conn.closed:
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("ROLLBACK TO SAVEPOINT pgcite_call")
                        conn.execute("RELEASE SAVEPOINT pgcite_call")
                raise
            if savepoint:
                conn.execute("RELEASE SAVEPOINT pgcite_call")
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def _fetch(self, sql: str, params: Params = None) -> list[Row]:
        with self._guard():
            with self._conn.cursor(row_factory=dict_row) as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else []

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Client]:
        """Groups several calls in one transaction (a savepoint if one is already open)."""
        try:
            with self._conn.transaction():
                yield self
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def close(self) -> None:
        if self._owns and not self._conn.closed:
            self._conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ tenants
    def create_tenant(self, tenant: str, ts_config: str | None = None) -> str:
        """Creates a tenant (idempotent); ts_config is its text search configuration (default english)."""
        return _one(self._fetch(*_Q.create_tenant(tenant, ts_config)), "rag.create_tenant")["tenant"]

    def grant_tenant(self, tenant: str, role: str) -> None:
        """Lets `role` (and its members) read the tenant."""
        self._fetch(*_Q.grant_tenant(tenant, role))

    def revoke_tenant(self, tenant: str, role: str) -> bool:
        return bool(_one(self._fetch(*_Q.revoke_tenant(tenant, role)), "rag.revoke_tenant")["revoked"])

    def tenant_gate(self, tenant: str) -> dict[str, Any]:
        """The tenant's gate settings (rag.tenant.gate), e.g. {"calibrated_on": [...]}; {} if not visible."""
        rows = self._fetch(*_Q.tenant_gate(tenant))
        return dict(rows[0]["gate"] or {}) if rows else {}

    # ------------------------------------------------------------------ documents
    def configure(self, **settings: str | int | float | None) -> None:
        """Sets pgcite settings for the whole database with rag.set_config (needs pgcite_admin; `model` and
        `python_path` a superuser), e.g. configure(torch_threads=2); None restores the default. Settings are
        never per session: they shape answers and choose code, so no session may pick its own."""
        for name, value in settings.items():
            self._conn.execute("SELECT rag.set_config(%s, %s)", (name, None if value is None else str(value)))

    def ingest(
        self,
        tenant: str,
        doc_key: str,
        body: str,
        format: str = "auto",
        title: str | None = None,
        source_url: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> IngestResult:
        """Parses, chunks, embeds and stores one document in one transaction (inserted, updated, unchanged,
        empty): rag.ingest in the server, or (client_side, or a server without pgcite_python) the same
        chunker and model in this process, then rag.store_parsed. An unchanged document is found before it
        is parsed."""
        plan = self.plan()
        if not plan.ingest_locally:
            sql, params = _Q.ingest(tenant, doc_key, body, format, title, source_url, metadata)
            return IngestResult.from_row(_one(self._fetch(sql, params), "rag.ingest"))
        pipeline = plan.ingest_pipeline()
        args = (tenant, doc_key, body, format)
        rows = self._fetch(
            *_Q.document_unchanged(*args, pipeline.chunker_version, title, source_url, metadata)
        )
        if rows:
            return IngestResult.from_row(rows[0])
        result = pipeline.parse(body, format)
        hashes = pipeline.text_hashes(result)
        rows = self._fetch(*_Q.embedded_texts(tenant, hashes)) if hashes else []
        stored = {bytes(r["content_hash"]) for r in rows}
        parsed = pipeline.embed_parsed(result, stored)
        rows = self._fetch(*_Q.store_parsed(*args, parsed, title, source_url, metadata))
        return IngestResult.from_row(_one(rows, "rag.store_parsed"))

    def delete_document(self, tenant: str, doc_key: str) -> bool:
        """Retires the current version of a document; False if there was none."""
        return bool(_one(self._fetch(*_Q.delete_document(tenant, doc_key)), "rag.delete_document")["deleted"])

    # ------------------------------------------------------------------ questions
    def retrieve(
        self, question: str, tenant: str, k: int = 8, query_embedding: EmbeddingLike | None = None
    ) -> list[RetrievedChunk]:
        """The k best chunks for a question, best first."""
        qemb = self._query_embedding(question, tenant, query_embedding)
        return [RetrievedChunk.from_row(r) for r in self._fetch(*_Q.retrieve(question, tenant, k, qemb))]

    def embed_question(self, question: str, tenant: str) -> list[float]:
        """The question's embedding as rag.ask computes it, in this client: the spelling-corrected question
        (rag.correct_question) if a word was corrected, else the question, embedded by the local model."""
        from .local import question_text

        pipeline = self.plan().pipeline()
        corrected = _one(self._fetch(*_Q.correct_question(question, tenant)), "rag.correct_question")
        return pipeline.embed([question_text(question, corrected["corrected"])])[0].tolist()

    def _query_embedding(self, question: str, tenant: str, query_embedding: EmbeddingLike | None) -> Any:
        if query_embedding is None and not _blank(question) and self.plan().embed_locally:
            query_embedding = self.embed_question(question, tenant)
        return _embedding_param(query_embedding, self._vector)

    def ask(
        self,
        question: str,
        tenant: str,
        k: int = 5,
        query_embedding: EmbeddingLike | None = None,
        options: Mapping[str, Any] | None = None,
        *,
        generate: Generate | None = None,
        generator_name: str | None = None,
    ) -> Answer:
        """An extractive answer with verified citations, or an abstention (Answer.status).

        With `generate` (your own model, e.g. on a managed PostgreSQL without PL/Python): rag.context
        retrieves and gates, `generate(request)` gets the chat-completions request {messages,
        response_format} and returns the model's reply (text or a CitedAnswer dict), and rag.answer holds it
        to the same proof as a configured generator: one retry with the errors (generate is called again),
        then answered or abstained. An exception from `generate` is recorded as generator_unavailable.
        `generator_name` is logged. Without query_embedding, the question is embedded by the server, or in
        this client when the server cannot (no pgcite_python) or client_side is set."""
        qemb = self._query_embedding(question, tenant, query_embedding)
        if generate is None:
            return Answer.from_row(_one(self._fetch(*_Q.ask(question, tenant, k, qemb, options)), "rag.ask"))
        ctx = _one(self._fetch(*_Q.context(question, tenant, k, qemb, options)), "rag.context")
        if ctx["status"] != "ready":
            return _context_answer(ctx)
        name = _generator_name(generate, generator_name)
        request = dict(ctx["prompt"])
        while True:
            try:
                reply, error = _reply_param(generate(request)), None
            except Exception as exc:  # the caller's generator failed: recorded, not raised
                reply, error = None, f"{type(exc).__name__}: {exc}"
            row = _one(self._fetch(*_Q.answer(ctx["context_id"], reply, name, error)), "rag.answer")
            if row["status"] != "retry":
                return Answer.from_row(row)
            request = dict(row["evidence"]["retry"])

    def explain(
        self, question: str, tenant: str, k: int = 8, query_embedding: EmbeddingLike | None = None
    ) -> list[Row]:
        """rag.explain's rows as dicts (their columns are not fixed); the question embedded as ask does."""
        qemb = self._query_embedding(question, tenant, query_embedding)
        return self._fetch(*_Q.explain(question, tenant, k, qemb))

    def calibrate(self, tenant: str, questions: Sequence[Mapping[str, Any]]) -> list[Row]:
        """rag.calibrate's decision table; questions: [{id, question, expect, kind}] (embedded in this client,
        as ask does, where the server cannot embed or client_side is set)."""
        if self.plan().embed_locally:
            questions = [
                q
                if _blank(q.get("question")) or "query_embedding" in q
                else {**q, "query_embedding": self.embed_question(q["question"], tenant)}
                for q in questions
            ]
        return self._fetch(*_Q.calibrate(tenant, questions))

    # ------------------------------------------------------------------ audit
    def replay(self, ask_id: int) -> ReplayResult:
        return ReplayResult.from_row(_one(self._fetch(*_Q.replay(ask_id)), "rag.replay"))

    def verify_log(self, tenant: str) -> LogVerification:
        return LogVerification.from_row(_one(self._fetch(*_Q.verify_log(tenant)), "rag.verify_log"))

    # ------------------------------------------------------------------ server
    def server_status(self) -> dict[str, Any]:
        """Database, role, server version, installed extensions and tenant/document/chunk/ask counts."""
        server = _one(self._fetch(*_Q.SERVER), "status")
        extensions = self._fetch(*_Q.EXTENSIONS)
        counts = _one(self._fetch(*_Q.COUNTS), "status") if server["has_schema"] else None
        return _status(server, extensions, counts)


class AsyncClient:
    """Asynchronous pgcite client: the methods of `Client` as coroutines.

    >>> async with await AsyncClient.connect("dbname=pgcite") as c:
    ...     a = await c.ask("How do I prevent transaction ID wraparound?", tenant="docs")
    """

    def __init__(
        self, connection: psycopg.AsyncConnection, *, owns: bool = False, client_side: bool | None = None
    ) -> None:
        self._conn = connection
        self._owns = owns
        self._vector = False
        self.dsn: str | None = None
        self.client_side = _check_client_side(client_side)
        self._plan_cache: _Plan | None = None

    @classmethod
    async def connect(
        cls, dsn: str | None = None, *, connect_timeout: int = 10, client_side: bool | None = None
    ) -> AsyncClient:
        """Opens an autocommit connection (dsn, else DATABASE_URL, else the embedded cluster); client_side as
        for Client (the local model runs in a worker thread)."""
        _check_client_side(client_side)
        resolved = resolve_dsn(dsn)
        try:
            conn = await psycopg.AsyncConnection.connect(
                resolved, autocommit=True, connect_timeout=connect_timeout, application_name=APPLICATION_NAME
            )
        except psycopg.Error as exc:
            raise translate(exc) from exc
        client = cls(conn, owns=True, client_side=client_side)
        client.dsn = resolved
        await client._register_vector()
        return client

    @classmethod
    async def from_connection(
        cls, connection: psycopg.AsyncConnection, *, client_side: bool | None = None
    ) -> AsyncClient:
        client = cls(connection, owns=False, client_side=client_side)
        await client._register_vector()
        return client

    async def plan(self) -> _Plan:
        if self._plan_cache is None:
            plan = _Plan(_one(await self._fetch(*_Q.CAPABILITIES), "capabilities"), self.client_side)
            if plan.local:
                plan.caps["model"] = _one(await self._fetch(*_Q.MODEL), "rag.model_name")["model"]
            self._plan_cache = plan
        return self._plan_cache

    async def check_client_side(self) -> bool:
        plan = await self.plan()
        if plan.ingest_locally:
            await asyncio.to_thread(plan.ingest_pipeline)
        return plan.ingest_locally

    async def embed_question(self, question: str, tenant: str) -> list[float]:
        from .local import question_text

        pipeline = await asyncio.to_thread((await self.plan()).pipeline)
        corrected = _one(await self._fetch(*_Q.correct_question(question, tenant)), "rag.correct_question")
        text = question_text(question, corrected["corrected"])
        return (await asyncio.to_thread(pipeline.embed, [text]))[0].tolist()

    async def _query_embedding(
        self, question: str, tenant: str, query_embedding: EmbeddingLike | None
    ) -> Any:
        if query_embedding is None and not _blank(question) and (await self.plan()).embed_locally:
            query_embedding = await self.embed_question(question, tenant)
        return _embedding_param(query_embedding, self._vector)

    async def _register_vector(self) -> None:
        from pgvector.psycopg import register_vector_async

        try:
            async with self._guard():
                await register_vector_async(self._conn)
        except (psycopg.ProgrammingError, PgciteError):
            self._vector = False
        else:
            self._vector = True

    @property
    def connection(self) -> psycopg.AsyncConnection:
        return self._conn

    @contextlib.asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        conn = self._conn
        savepoint = not conn.autocommit
        try:
            if savepoint:
                await conn.execute("SAVEPOINT pgcite_call")
            try:
                yield
            except psycopg.Error:
                if savepoint and not conn.closed:
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("ROLLBACK TO SAVEPOINT pgcite_call")
                        await conn.execute("RELEASE SAVEPOINT pgcite_call")
                raise
            if savepoint:
                await conn.execute("RELEASE SAVEPOINT pgcite_call")
        except psycopg.Error as exc:
            raise translate(exc) from exc

    async def _fetch(self, sql: str, params: Params = None) -> list[Row]:
        async with self._guard():
            async with self._conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(sql, params)
                return await cur.fetchall() if cur.description else []

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncClient]:
        try:
            async with self._conn.transaction():
                yield self
        except psycopg.Error as exc:
            raise translate(exc) from exc

    async def close(self) -> None:
        if self._owns and not self._conn.closed:
            await self._conn.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def create_tenant(self, tenant: str, ts_config: str | None = None) -> str:
        return _one(await self._fetch(*_Q.create_tenant(tenant, ts_config)), "rag.create_tenant")["tenant"]

    async def grant_tenant(self, tenant: str, role: str) -> None:
        await self._fetch(*_Q.grant_tenant(tenant, role))

    async def revoke_tenant(self, tenant: str, role: str) -> bool:
        return bool(_one(await self._fetch(*_Q.revoke_tenant(tenant, role)), "rag.revoke_tenant")["revoked"])

    async def tenant_gate(self, tenant: str) -> dict[str, Any]:
        rows = await self._fetch(*_Q.tenant_gate(tenant))
        return dict(rows[0]["gate"] or {}) if rows else {}

    async def ingest(
        self,
        tenant: str,
        doc_key: str,
        body: str,
        format: str = "auto",
        title: str | None = None,
        source_url: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> IngestResult:
        plan = await self.plan()
        if not plan.ingest_locally:
            sql, params = _Q.ingest(tenant, doc_key, body, format, title, source_url, metadata)
            return IngestResult.from_row(_one(await self._fetch(sql, params), "rag.ingest"))
        pipeline = await asyncio.to_thread(plan.ingest_pipeline)
        args = (tenant, doc_key, body, format)
        rows = await self._fetch(
            *_Q.document_unchanged(*args, pipeline.chunker_version, title, source_url, metadata)
        )
        if rows:
            return IngestResult.from_row(rows[0])
        result = await asyncio.to_thread(pipeline.parse, body, format)
        hashes = pipeline.text_hashes(result)
        rows = await self._fetch(*_Q.embedded_texts(tenant, hashes)) if hashes else []
        stored = {bytes(r["content_hash"]) for r in rows}
        parsed = await asyncio.to_thread(pipeline.embed_parsed, result, stored)
        rows = await self._fetch(*_Q.store_parsed(*args, parsed, title, source_url, metadata))
        return IngestResult.from_row(_one(rows, "rag.store_parsed"))

    async def delete_document(self, tenant: str, doc_key: str) -> bool:
        rows = await self._fetch(*_Q.delete_document(tenant, doc_key))
        return bool(_one(rows, "rag.delete_document")["deleted"])

    async def retrieve(
        self, question: str, tenant: str, k: int = 8, query_embedding: EmbeddingLike | None = None
    ) -> list[RetrievedChunk]:
        qemb = await self._query_embedding(question, tenant, query_embedding)
        return [
            RetrievedChunk.from_row(r) for r in await self._fetch(*_Q.retrieve(question, tenant, k, qemb))
        ]

    async def ask(
        self,
        question: str,
        tenant: str,
        k: int = 5,
        query_embedding: EmbeddingLike | None = None,
        options: Mapping[str, Any] | None = None,
        *,
        generate: AsyncGenerate | None = None,
        generator_name: str | None = None,
    ) -> Answer:
        """Client.ask; `generate` may be a coroutine function."""
        qemb = await self._query_embedding(question, tenant, query_embedding)
        if generate is None:
            return Answer.from_row(
                _one(await self._fetch(*_Q.ask(question, tenant, k, qemb, options)), "rag.ask")
            )
        ctx = _one(await self._fetch(*_Q.context(question, tenant, k, qemb, options)), "rag.context")
        if ctx["status"] != "ready":
            return _context_answer(ctx)
        name = _generator_name(generate, generator_name)
        request = dict(ctx["prompt"])
        while True:
            try:
                out = generate(request)
                if inspect.isawaitable(out):
                    out = await out
                reply, error = _reply_param(out), None
            except Exception as exc:
                reply, error = None, f"{type(exc).__name__}: {exc}"
            row = _one(await self._fetch(*_Q.answer(ctx["context_id"], reply, name, error)), "rag.answer")
            if row["status"] != "retry":
                return Answer.from_row(row)
            request = dict(row["evidence"]["retry"])

    async def explain(
        self, question: str, tenant: str, k: int = 8, query_embedding: EmbeddingLike | None = None
    ) -> list[Row]:
        qemb = await self._query_embedding(question, tenant, query_embedding)
        return await self._fetch(*_Q.explain(question, tenant, k, qemb))

    async def calibrate(self, tenant: str, questions: Sequence[Mapping[str, Any]]) -> list[Row]:
        if (await self.plan()).embed_locally:
            embedded = []
            for q in questions:
                if not (_blank(q.get("question")) or "query_embedding" in q):
                    q = {**q, "query_embedding": await self.embed_question(q["question"], tenant)}
                embedded.append(q)
            questions = embedded
        return await self._fetch(*_Q.calibrate(tenant, questions))

    async def replay(self, ask_id: int) -> ReplayResult:
        return ReplayResult.from_row(_one(await self._fetch(*_Q.replay(ask_id)), "rag.replay"))

    async def verify_log(self, tenant: str) -> LogVerification:
        return LogVerification.from_row(_one(await self._fetch(*_Q.verify_log(tenant)), "rag.verify_log"))

    async def server_status(self) -> dict[str, Any]:
        server = _one(await self._fetch(*_Q.SERVER), "status")
        extensions = await self._fetch(*_Q.EXTENSIONS)
        counts = _one(await self._fetch(*_Q.COUNTS), "status") if server["has_schema"] else None
        return _status(server, extensions, counts)
