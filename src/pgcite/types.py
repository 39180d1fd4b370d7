"""What the client returns: frozen dataclasses built from the rows of pgcite's SQL functions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class Citation:
    """One numbered citation of an answer: the chunk it comes from and the verified quote."""

    n: int
    chunk_id: int
    doc_key: str
    doc_version: int | None = None
    chunk_index: int | None = None
    anchor: str | None = None
    title: str | None = None
    source_url: str | None = None
    quote: str | None = None
    quote_start: int | None = None
    quote_end: int | None = None
    verified: bool = False

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Citation:
        """From one element of rag.ask's `citations` array (unknown keys are ignored)."""
        return cls(
            n=int(obj["n"]),
            chunk_id=int(obj["chunk_id"]),
            doc_key=str(obj["doc_key"]),
            doc_version=_int(obj.get("doc_version")),
            chunk_index=_int(obj.get("chunk_index")),
            anchor=obj.get("anchor"),
            title=obj.get("title"),
            source_url=obj.get("source_url"),
            quote=obj.get("quote"),
            quote_start=_int(obj.get("quote_start")),
            quote_end=_int(obj.get("quote_end")),
            verified=bool(obj.get("verified", False)),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Answer:
    """The one row of rag.ask: an answer with citations, or an abstention with its reason."""

    ask_id: int | None
    status: str  # answered | abstained (rag.answer: retry, handled by Client.ask)
    answer: str | None
    reason: str | None
    citations: list[Citation] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Answer:
        citations = sorted((Citation.from_json(c) for c in row.get("citations") or []), key=lambda c: c.n)
        return cls(
            ask_id=_int(row.get("ask_id")),
            status=str(row["status"]),
            answer=row.get("answer"),
            reason=row.get("reason"),
            citations=citations,
            evidence=dict(row.get("evidence") or {}),
        )

    @property
    def answered(self) -> bool:
        return self.status == "answered"

    @property
    def abstained(self) -> bool:
        return self.status == "abstained"

    @property
    def fingerprint(self) -> str | None:
        """Hash of everything the answer depended on; rag.replay compares it."""
        return self.evidence.get("fingerprint")

    @property
    def gate(self) -> dict[str, Any]:
        """The answer gate's signals and thresholds (evidence.gate)."""
        gate = self.evidence.get("gate")
        return gate if isinstance(gate, dict) else {}

    @property
    def generation(self) -> dict[str, Any]:
        """How a generated answer came about (evidence.generation: generator, model, attempts); {} if
        extractive."""
        generation = self.evidence.get("generation")
        return generation if isinstance(generation, dict) else {}

    @property
    def chunks(self) -> list[dict[str, Any]]:
        """The retrieved chunks the gate looked at, in rank order (evidence.chunks)."""
        chunks = self.evidence.get("chunks")
        if not isinstance(chunks, list):
            return []
        return sorted(chunks, key=lambda c: (c.get("rank") is None, c.get("rank") or 0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ask_id": self.ask_id,
            "status": self.status,
            "answer": self.answer,
            "reason": self.reason,
            "citations": [c.to_dict() for c in self.citations],
            "evidence": self.evidence,
        }


@dataclass(frozen=True)
class IngestResult:
    """One row of rag.ingest. status: inserted | updated | unchanged."""

    doc_key: str
    version: int
    status: str
    chunks: int
    empty_sections: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> IngestResult:
        return cls(
            doc_key=str(row["doc_key"]),
            version=int(row["version"]),
            status=str(row["status"]),
            chunks=int(row["chunks"]),
            empty_sections=int(row.get("empty_sections") or 0),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RetrievedChunk:
    """One row of rag.retrieve, best first."""

    rank: int
    chunk_id: int
    doc_key: str
    doc_version: int
    chunk_index: int
    anchor: str | None
    title: str | None
    content: str
    distance: float | None
    trgm_score: float | None
    fts_score: float | None
    fused_score: float | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RetrievedChunk:
        return cls(
            rank=int(row["rank"]),
            chunk_id=int(row["chunk_id"]),
            doc_key=str(row["doc_key"]),
            doc_version=int(row["doc_version"]),
            chunk_index=int(row["chunk_index"]),
            anchor=row.get("anchor"),
            title=row.get("title"),
            content=str(row["content"]),
            distance=_float(row.get("distance")),
            trgm_score=_float(row.get("trgm_score")),
            fts_score=_float(row.get("fts_score")),
            fused_score=_float(row.get("fused_score")),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReplayResult:
    """One row of rag.replay: does the logged question retrieve the same evidence today?"""

    ask_id: int
    identical: bool
    fingerprint_then: str | None
    fingerprint_now: str | None
    chunks_then: list[int]
    chunks_now: list[int]
    # generated answers: do the stored reply's citations still verify against today's chunks (None otherwise)
    citations_verify: bool | None = None
    recheck: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ReplayResult:
        return cls(
            ask_id=int(row["ask_id"]),
            identical=bool(row["identical"]),
            fingerprint_then=row.get("fingerprint_then"),
            fingerprint_now=row.get("fingerprint_now"),
            chunks_then=[int(x) for x in row.get("chunks_then") or []],
            chunks_now=[int(x) for x in row.get("chunks_now") or []],
            citations_verify=row.get("citations_verify"),
            recheck=row.get("recheck"),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LogVerification:
    """The row of rag.verify_log: is the tenant's hash-chained audit log intact?"""

    ok: bool
    checked: int
    first_bad_ask_id: int | None
    problem: str | None = None
    unsealed: int = 0  # entries written but not yet chained (sealed by the next ask or verify_log)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> LogVerification:
        return cls(
            ok=bool(row["ok"]),
            checked=int(row["checked"] or 0),
            first_bad_ask_id=_int(row.get("first_bad_ask_id")),
            problem=row.get("problem"),
            unsealed=int(row.get("unsealed") or 0),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
