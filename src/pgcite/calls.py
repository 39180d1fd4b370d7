"""What Client and AsyncClient share: the SQL of every call (`_Q`: the same functions of schema `rag`
with the same arguments), where a client parses and embeds (`_Plan`), how the DSN is found, and the
conversions of parameters and rows."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pgvector import Vector
from psycopg.types.json import Jsonb

from .errors import ConnectionFailed, InvalidParameter, NotReady, PgciteError
from .types import Answer

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
