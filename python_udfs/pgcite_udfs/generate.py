"""Generated answers: the call to an OpenAI-compatible chat-completions endpoint, and the CitedAnswer model.

The database builds the request and decides what reaches the caller (sql/core/065-generate.sql). This module
only sends the request of one attempt with httpx (or httpx2), waits for the reply while the backend stays
cancellable (statement_timeout, pg_cancel_backend), and validates the reply with pydantic. It never raises
for the generator's own failures: a timeout, a refused connection, an HTTP error or a reply that is not a
chat completion come back as {"ok": false, "error": ...}, which the database turns into
generator_unavailable. The API key is used for the Authorization header only and is scrubbed from everything
returned.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

# A reply longer than this is cut (the model's max_tokens bounds it long before).
MAX_REPLY_CHARS = 200_000
# Bytes of an HTTP response body read at most (a server that streams forever is cut off).
MAX_BODY_BYTES = 4 * 1024 * 1024
# How often the waiting backend checks for a cancel, in seconds.
POLL_S = 0.05
# Time beyond the generator's timeout before the wait gives up regardless of the HTTP client.
GRACE_S = 0.5
REDACTED = "[redacted]"


class Citation(BaseModel):
    """One citation of a CitedAnswer: a source number of this call and a verbatim quote from it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    n: int = Field(ge=1)
    quote: str


class CitedAnswer(BaseModel):
    """What a generator must return (the JSON schema rag._cited_answer_schema sends is the same)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    answer: str | None
    citations: list[Citation]
    abstain: bool
    abstain_reason: str | None = None

    @model_validator(mode="after")
    def _answer_unless_abstaining(self) -> CitedAnswer:
        if not self.abstain and not (self.answer or "").strip():
            raise ValueError("answer must not be empty unless abstain is true")
        return self


def strip_fence(text: str) -> str:
    """The JSON inside a Markdown code fence (```json ... ```), or the text itself (as rag._parse_reply)."""
    t = text.strip(" \t\n\r")
    m = re.fullmatch(r"```[A-Za-z]*\s*(.*?)\s*```", t, flags=re.S)
    return m.group(1) if m else t


def validation_errors(text: str | None) -> list[str]:
    """Pydantic's complaints about a raw reply ([] for a valid CitedAnswer)."""
    try:
        CitedAnswer.model_validate_json(strip_fence(text or ""))
    except ValidationError as e:
        out = []
        for err in e.errors():
            where = ".".join(str(p) for p in err.get("loc", ()))
            out.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
        return out
    return []


@dataclass(frozen=True)
class Generator:
    """A row of rag.generator (the API key is not part of it: api_key_env names where it lives)."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_s: float = 60.0
    max_tokens: int = 1024
    temperature: float = 0.0
    response_format: str = "json_schema"
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Generator:
        options = row.get("options") or {}
        if isinstance(options, str):
            options = json.loads(options)
        return cls(
            name=row["name"],
            base_url=row["base_url"],
            model=row["model"],
            api_key_env=row.get("api_key_env"),
            timeout_s=float(row.get("timeout_s") or 60),
            max_tokens=int(row.get("max_tokens") or 1024),
            temperature=float(row.get("temperature") or 0),
            response_format=row.get("response_format") or "json_schema",
            options=dict(options),
        )

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


def request_body(
    gen: Generator, messages: Sequence[Mapping[str, Any]], response_format: Mapping | None
) -> dict:
    """The chat-completions request: the generator's extra options, then what pgcite sets itself."""
    body: dict[str, Any] = dict(gen.options)
    body.update(
        model=gen.model,
        messages=list(messages),
        temperature=gen.temperature,
        max_tokens=gen.max_tokens,
        stream=False,
    )
    if gen.response_format == "json_schema" and response_format:
        body["response_format"] = dict(response_format)
    elif gen.response_format == "json_object":
        body["response_format"] = {"type": "json_object"}
    return body


def _scrub(text: str | None, secret: str | None) -> str | None:
    if text is None or not secret:
        return text
    return text.replace(secret, REDACTED)


def http_client():
    """The HTTP client module: httpx (requirements-db.txt), else httpx2, its successor with the same API
    (huggingface_hub 2 depends on it)."""
    try:
        import httpx
    except ImportError:
        import httpx2 as httpx
    return httpx


def _post(url: str, headers: dict, body: dict, timeout_s: float, holder: dict) -> None:
    """Runs in a worker thread: one POST, the status and at most MAX_BODY_BYTES of the body into holder."""
    try:  # PostgreSQL's signal handlers must run in the backend's own thread, never here
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    except (AttributeError, OSError, ValueError):
        pass
    httpx = http_client()
    try:
        with httpx.Client(
            timeout=httpx.Timeout(timeout_s), trust_env=False, follow_redirects=False
        ) as client:
            holder["client"] = client
            with client.stream("POST", url, json=body, headers=headers) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        holder["truncated"] = True
                        break
                holder["status"] = response.status_code
                holder["body"] = b"".join(chunks)[:MAX_BODY_BYTES].decode("utf-8", errors="replace")
    except httpx.TimeoutException as e:
        holder["error"] = f"no reply within {timeout_s:g} s ({type(e).__name__})"
    except httpx.HTTPError as e:
        holder["error"] = f"{type(e).__name__}: {e}"
    except Exception as e:  # anything else the transport raises: still the generator's failure
        holder["error"] = f"{type(e).__name__}: {e}"
    finally:
        holder["done"] = True


def body_message(body: str) -> str:
    """What a reply that is no chat completion says, for the evidence: the message of an OpenAI-style JSON
    error ({"error": {"message": ...}}, {"error": "..."} or {"message": "..."}), at most 300 characters; of
    any other body only its size. A generator's URL is an administrator's choice, and echoing any body let
    it read the first 300 characters of whatever a service on the database server's network answers to a
    POST (security round 5)."""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    message = None
    if isinstance(doc, dict):
        error = doc.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if not isinstance(message, str):
            message = doc.get("message")
    if isinstance(message, str):
        return " ".join(message.split())[:300]
    return f"a body of {len(body.encode('utf-8', 'replace'))} bytes that is no JSON error message"


def parse_completion(status: int, body: str) -> dict[str, Any]:
    """The outcome of an HTTP exchange: the message content of a chat completion, or why there is none."""
    if status >= 400:
        return {"ok": False, "http_status": status, "error": f"HTTP {status}: {body_message(body)}"}
    try:
        doc = json.loads(body)
        choice = doc["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return {
            "ok": False,
            "http_status": status,
            "error": f"the reply is not a chat completion: {body_message(body)}",
        }
    content = message.get("content") if isinstance(message, dict) else None
    out: dict[str, Any] = {
        "ok": True,
        "http_status": status,
        "reported_model": doc.get("model") if isinstance(doc, dict) else None,
        "finish_reason": choice.get("finish_reason") if isinstance(choice, dict) else None,
    }
    if not isinstance(content, str):
        refusal = message.get("refusal") if isinstance(message, dict) else None
        content = ""
        out["validation_errors"] = [f"the model sent no content{f' (refusal: {refusal})' if refusal else ''}"]
    if len(content) > MAX_REPLY_CHARS:
        content = content[:MAX_REPLY_CHARS]
        out["truncated"] = True
    out["content"] = content
    return out


def call(
    gen: Generator,
    messages: Sequence[Mapping[str, Any]],
    response_format: Mapping | None,
    *,
    api_key: str | None,
    check_cancel: Callable[[], Any],
) -> dict[str, Any]:
    """One chat-completions request. Waits at most gen.timeout_s (+ GRACE_S); calls check_cancel every POLL_S
    (in PostgreSQL it runs a query, so a pending cancel raises there and ends the wait). Returns {ok, content,
    http_status, elapsed_ms, reported_model, finish_reason, validation_errors} or {ok: false, error, ...}."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    body = request_body(gen, messages, response_format)
    holder: dict[str, Any] = {}
    t0 = time.monotonic()
    worker = threading.Thread(
        target=_post,
        args=(gen.url, headers, body, gen.timeout_s, holder),
        name="pgcite-generator",
        daemon=True,
    )
    worker.start()
    deadline = t0 + gen.timeout_s + GRACE_S
    try:
        while not holder.get("done"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                holder.setdefault("error", f"no reply within {gen.timeout_s:g} s")
                break
            worker.join(min(POLL_S, remaining))
            if not holder.get("done"):
                check_cancel()
    finally:
        if not holder.get("done"):
            client = holder.get("client")
            try:
                if client is not None:
                    client.close()  # let the worker end early; it is a daemon thread in any case
            except Exception:
                pass
    elapsed_ms = round((time.monotonic() - t0) * 1000, 3)
    if "status" in holder and "error" not in holder:
        out = parse_completion(holder["status"], holder.get("body") or "")
    else:
        out = {"ok": False, "error": holder.get("error") or "no reply"}
    out["elapsed_ms"] = elapsed_ms
    if holder.get("truncated"):
        out["truncated"] = True
    if out.get("ok"):
        out.setdefault("validation_errors", [])
        out["validation_errors"] = out["validation_errors"] + validation_errors(out["content"])
    for key in ("content", "error"):
        out[key] = _scrub(out.get(key), api_key)
    if "validation_errors" in out:
        out["validation_errors"] = [_scrub(e, api_key) for e in out["validation_errors"]]
    return {k: v for k, v in out.items() if v is not None}
