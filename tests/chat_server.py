"""A local stand-in for an OpenAI-compatible model: an HTTP server on 127.0.0.1 that speaks the
chat-completions protocol (POST <base>/chat/completions) and answers from scripts.

Each script has its own base URL, http://127.0.0.1:<port>/<script>/v1, so every generator row of a test points
at exactly one behaviour. A script is a function (request, attempt) -> Reply, where request is the decoded
JSON body (plus "_authorization", the header the client sent) and attempt is 1 for the first request of a
conversation and 2 for the retry (the retry carries the rejected reply and the errors as two more messages).
The server records every request it receives and the content or error it sent back.

Sources are read back from the prompt pgcite sends (<source n="1" title="...">...</source>), so scripts quote
real sentences of whatever chunks were retrieved.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SOURCE_RE = re.compile(r'<source n="(\d+)" title="[^"]*">\n(.*?)\n</source>', re.S)


@dataclass
class Reply:
    """What the server sends: a chat completion whose message content is `content` (status 200), or an HTTP
    error `status` with `body`, after sleeping `delay` seconds (cut short when the server stops)."""

    content: str | None = None
    status: int = 200
    body: str | None = None
    delay: float = 0.0


Script = Callable[[dict, int], Reply]


def sources_of(request: dict) -> dict[int, str]:
    """{n: content} of the sources in the first user message."""
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return {int(n): text for n, text in SOURCE_RE.findall(user)}


def attempt_of(request: dict) -> int:
    return 1 if len(request["messages"]) <= 2 else 2


def sentences(text: str) -> list[str]:
    """Whole sentences of a source that make good quotes: 40-300 characters, ending with a full stop, on one
    line, without brackets (so they cannot look like citation markers) or abbreviations."""
    out = []
    for piece in re.split(r"(?<=[.!?])\s+", text):
        s = piece.strip()
        if (
            40 <= len(s) <= 300
            and s.endswith(".")
            and "\n" not in s
            and not re.search(r"[\[\]`|#*]|e\.g\.|i\.e\.|etc\.|\bvs\.", s)
            and s[0].isupper()
        ):
            out.append(s)
    return out


def cited(answer: str | None, citations: list[dict], abstain: bool = False, reason: str | None = None) -> str:
    return json.dumps(
        {"answer": answer, "citations": citations, "abstain": abstain, "abstain_reason": reason}
    )


def first_sentence(request: dict, n: int) -> str:
    found = sentences(sources_of(request)[n])
    assert found, f"source {n} has no quotable sentence"
    return found[0]


class ChatServer:
    """The server and its scripts; `url(name)` is the base_url of a generator for script `name`."""

    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.requests: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                m = re.fullmatch(r"/([^/]+)/v1/chat/completions", self.path)
                try:
                    request = json.loads(raw)
                except ValueError:
                    request = {}
                record = {
                    "script": m.group(1) if m else None,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "body": request,
                }
                server.requests.append(record)
                script = server.scripts.get(m.group(1)) if m else None
                if script is None:
                    self._send(404, json.dumps({"error": {"message": f"no script for {self.path}"}}))
                    return
                reply = script({**request, "_authorization": record["authorization"]}, attempt_of(request))
                record["reply"] = reply
                if reply.delay:
                    server.stopping.wait(reply.delay)
                if reply.status != 200:
                    self._send(
                        reply.status, reply.body or json.dumps({"error": {"message": "scripted failure"}})
                    )
                    return
                completion = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": request.get("model", "scripted"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                }
                self._send(200, json.dumps(completion))

            def _send(self, status: int, body: str) -> None:
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="chat-server", daemon=True)

    def start(self) -> ChatServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}/v1"

    def add(self, name: str, script: Script) -> str:
        self.scripts[name] = script
        return self.url(name)

    def received(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["script"] == name]
