"""pgcite: retrieval-augmented answers with auditable citations, inside PostgreSQL.

The Python side is a thin client of the `rag` schema: `Client` / `AsyncClient`, the result types, and the
exceptions that SQLSTATEs map to.
"""

from importlib.metadata import PackageNotFoundError, version

from .async_client import AsyncClient
from .calls import resolve_dsn
from .client import Client
from .errors import (
    ERROR_CODES,
    Canceled,
    ConnectionFailed,
    InvalidParameter,
    LimitExceeded,
    LocalModelUnavailable,
    ModelUnavailable,
    NotReady,
    PermissionDenied,
    PgciteError,
    PythonEnvironmentMissing,
    UnknownTenant,
    translate,
)
from .types import Answer, Citation, IngestResult, LogVerification, ReplayResult, RetrievedChunk

try:
    __version__ = version("pgcite")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

__all__ = [
    "ERROR_CODES",
    "Answer",
    "AsyncClient",
    "Citation",
    "Client",
    "Canceled",
    "ConnectionFailed",
    "IngestResult",
    "InvalidParameter",
    "LimitExceeded",
    "LocalModelUnavailable",
    "LogVerification",
    "ModelUnavailable",
    "NotReady",
    "PermissionDenied",
    "PgciteError",
    "PythonEnvironmentMissing",
    "ReplayResult",
    "RetrievedChunk",
    "UnknownTenant",
    "__version__",
    "resolve_dsn",
    "translate",
]
