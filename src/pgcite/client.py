"""Python client for pgcite: `Client` on a psycopg Connection (`AsyncClient`, in pgcite.async_client, has the
same methods as coroutines).

Both call the same SQL functions of schema `rag` with the same arguments (pgcite.calls), return the
dataclasses of `pgcite.types`, and turn every psycopg error into a `pgcite.errors.PgciteError` subclass.

A client that opens its own connection runs it in autocommit mode: every call is its own transaction
(rag.ingest of one document is atomic; rag.ask commits its audit-log entry). A client given an existing
connection leaves transaction control to its owner; if that connection is inside a transaction, each call
runs under a savepoint so that a failed call does not abort the owner's transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

from .calls import (
    _Q,
    APPLICATION_NAME,
    EmbeddingLike,
    Generate,
    Params,
    Row,
    _blank,
    _check_client_side,
    _context_answer,
    _embedding_param,
    _generator_name,
    _one,
    _Plan,
    _reply_param,
    _status,
    resolve_dsn,
)
from .errors import PgciteError, translate
from .types import Answer, IngestResult, LogVerification, ReplayResult, RetrievedChunk


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
