"""pgcite's exceptions, and the one place where a PostgreSQL error becomes one of them.

pgcite raises standard SQLSTATEs where they fit and its own class PCxxx for the rest. psycopg turns codes
it does not know (PC001, PC002) into a generic DatabaseError, so `translate` reads `exc.diag.sqlstate`
instead of relying on psycopg's exception classes.
"""

from __future__ import annotations

from typing import NamedTuple

import psycopg


class PgciteError(Exception):
    """Any error reported by pgcite or by the database it talks to.

    `sqlstate` is the five-character SQLSTATE (None for client-side errors), `hint` and `detail` are the
    server's HINT and DETAIL fields when it sent them.
    """

    def __init__(
        self,
        message: str,
        *,
        sqlstate: str | None = None,
        hint: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.hint = hint
        self.detail = detail

    def __str__(self) -> str:
        return self.message


class PermissionDenied(PgciteError):
    """42501: the role is not a member of the tenant, or an append-only/immutable row was to be changed."""


class UnknownTenant(PgciteError):
    """42704: the tenant does not exist."""


class InvalidParameter(PgciteError):
    """22023 / 22004 / 22P02 / 22P05: a bad argument (k, dimensions, format, NULL key, binary garbage,
    a NUL character)."""


class LimitExceeded(PgciteError):
    """54000: a question over 4000 characters, a document over the setting max_document_bytes."""


class NotReady(PgciteError):
    """55000: a prerequisite is missing (no pgcite_python and no query_embedding; model mismatch)."""


class PythonEnvironmentMissing(PgciteError):
    """PC001: the DB-side Python environment (setting python_path) is missing."""


class ModelUnavailable(PgciteError):
    """PC002: the embedding model cannot be loaded inside PostgreSQL."""


class LocalModelUnavailable(PgciteError):
    """PC003: the client cannot parse or embed itself: its `local` extra (or the model) is missing."""

    def __init__(self, message: str, *, sqlstate: str | None = "PC003", **kw: str | None) -> None:
        super().__init__(message, sqlstate=sqlstate, **kw)


class Canceled(PgciteError):
    """57014: the statement was cancelled (statement_timeout, pg_cancel_backend) while pgcite worked."""


class ConnectionFailed(PgciteError):
    """The database could not be reached (SQLSTATE class 08, or no server found)."""


class ErrorCode(NamedTuple):
    condition: str  # PostgreSQL condition name, or pgcite's own name for PCxxx codes
    exception: type[PgciteError]
    meaning: str


ERROR_CODES: dict[str, ErrorCode] = {
    "42501": ErrorCode(
        "insufficient_privilege",
        PermissionDenied,
        "the role is not a member of the tenant or lacks the pgcite role, a direct write to a rag table, "
        "or a pgcite.* run-time parameter that tries to choose a setting",
    ),
    "42704": ErrorCode("undefined_object", UnknownTenant, "the tenant does not exist"),
    "22023": ErrorCode(
        "invalid_parameter_value",
        InvalidParameter,
        "an invalid argument: k outside 1..100, wrong or all-zero embedding, unknown format, empty document, "
        "an unknown option or an option of the wrong type or range",
    ),
    "22004": ErrorCode(
        "null_value_not_allowed", InvalidParameter, "a NULL (or empty) tenant, doc_key or member"
    ),
    "22000": ErrorCode(
        "data_exception", InvalidParameter, "NaN or infinity in a vector (pgvector refuses it)"
    ),
    "22P02": ErrorCode(
        "invalid_text_representation", InvalidParameter, "input that is not valid text (binary data)"
    ),
    "22P05": ErrorCode(
        "untranslatable_character",
        InvalidParameter,
        "a \\u0000 in JSON text (PostgreSQL text cannot hold NUL)",
    ),
    "54000": ErrorCode(
        "program_limit_exceeded",
        LimitExceeded,
        "a question over 4000 characters, or a document over the setting max_document_bytes",
    ),
    "55000": ErrorCode(
        "object_not_in_prerequisite_state",
        NotReady,
        "no pgcite_python and no query_embedding given, the tenant is embedded with another model, or the "
        "client embeds with another model than the database's",
    ),
    "57014": ErrorCode(
        "query_canceled", Canceled, "cancelled by statement_timeout or pg_cancel_backend while pgcite worked"
    ),
    "PC001": ErrorCode(
        "pgcite_python_environment_missing",
        PythonEnvironmentMissing,
        "the DB-side Python environment (setting python_path) is missing or incomplete",
    ),
    "PC002": ErrorCode(
        "pgcite_model_unavailable",
        ModelUnavailable,
        "the embedding model cannot be loaded inside PostgreSQL",
    ),
    "PC003": ErrorCode(
        "pgcite_local_model_unavailable",
        LocalModelUnavailable,
        "the client cannot parse or embed itself (client-side ingest, questions embedded in the client): "
        "its `local` extra is not installed or the model cannot be loaded",
    ),
}

# Condition names as they appear in `RAISE ... USING ERRCODE = '<name>'` -> SQLSTATE.
CONDITION_NAMES: dict[str, str] = {entry.condition: code for code, entry in ERROR_CODES.items()}


def exception_for(sqlstate: str | None) -> type[PgciteError]:
    """The exception class for a SQLSTATE (PgciteError for codes pgcite does not raise)."""
    if sqlstate is None:
        return PgciteError
    entry = ERROR_CODES.get(sqlstate.upper())
    if entry is not None:
        return entry.exception
    if sqlstate.startswith("08"):
        return ConnectionFailed
    return PgciteError


def translate(exc: psycopg.Error) -> PgciteError:
    """A psycopg error as the matching PgciteError subclass, with SQLSTATE, HINT and DETAIL."""
    diag = exc.diag
    sqlstate = diag.sqlstate
    message = diag.message_primary or str(exc).strip() or type(exc).__name__
    cls = exception_for(sqlstate)
    if sqlstate is None:
        # Errors raised by psycopg itself, before anything reached the server.
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            cls = ConnectionFailed
        elif isinstance(exc, psycopg.DataError):
            cls = InvalidParameter  # e.g. a NUL byte in a string parameter
    err = cls(message, sqlstate=sqlstate, hint=diag.message_hint, detail=diag.message_detail)
    err.__cause__ = exc
    return err
