"""`AsyncClient`: the methods of pgcite.client.Client as coroutines, on a psycopg AsyncConnection (the
local model, where the client embeds, runs in a worker thread)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

from .calls import (
    _Q,
    APPLICATION_NAME,
    AsyncGenerate,
    EmbeddingLike,
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
