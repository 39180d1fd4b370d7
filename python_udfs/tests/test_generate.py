"""pgcite_udfs.generate and pgcite_udfs.support outside PostgreSQL: the CitedAnswer model, the request, the
chat-completions call against a local HTTP server (timeouts, cancel, errors, the key scrubbed), and the
support model's interface."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from pgcite_udfs import generate, support

GOOD = {
    "answer": "VACUUM must run at least once every two billion transactions [1].",
    "citations": [
        {"n": 1, "quote": "every table must be vacuumed at least once every two billion transactions"}
    ],
    "abstain": False,
    "abstain_reason": None,
}


# ---------------------------------------------------------------- the CitedAnswer model
def test_a_valid_reply_has_no_errors():
    assert generate.validation_errors(json.dumps(GOOD)) == []
    assert generate.validation_errors("```json\n" + json.dumps(GOOD) + "\n```") == []  # a fenced reply
    abstain = {"answer": None, "citations": [], "abstain": True, "abstain_reason": "not in the sources"}
    assert generate.validation_errors(json.dumps(abstain)) == []
    assert (
        generate.validation_errors(json.dumps({k: v for k, v in abstain.items() if k != "abstain_reason"}))
        == []
    )


@pytest.mark.parametrize(
    "reply",
    [
        "not json",
        "[]",
        json.dumps({**GOOD, "extra": 1}),
        json.dumps({**GOOD, "citations": [{"n": 1, "quote": "q", "chunk_id": 7}]}),  # no smuggled chunk ids
        json.dumps({**GOOD, "citations": [{"n": 0, "quote": "q"}]}),
        json.dumps({**GOOD, "citations": [{"n": 1.5, "quote": "q"}]}),
        json.dumps({**GOOD, "citations": [{"n": "1", "quote": "q"}]}),
        json.dumps({**GOOD, "abstain": "no"}),
        json.dumps({**GOOD, "answer": "  "}),  # an empty answer that does not abstain
        json.dumps({k: v for k, v in GOOD.items() if k != "citations"}),
    ],
)
def test_invalid_replies_have_errors(reply):
    assert generate.validation_errors(reply)


def test_the_schema_pgcite_sends_matches_the_model():
    schema = generate.CitedAnswer.model_json_schema()
    assert set(schema["properties"]) == {"answer", "citations", "abstain", "abstain_reason"}
    assert schema["additionalProperties"] is False


# ---------------------------------------------------------------- the request
def test_the_request_puts_pgcite_fields_over_the_generator_options():
    gen = generate.Generator(
        name="g",
        base_url="http://h/v1",
        model="m",
        temperature=0,
        max_tokens=99,
        options={"seed": 7, "top_p": 1},
    )
    rf = {"type": "json_schema", "json_schema": {"name": "CitedAnswer", "schema": {}}}
    body = generate.request_body(gen, [{"role": "user", "content": "q"}], rf)
    assert body["model"] == "m" and body["max_tokens"] == 99 and body["temperature"] == 0
    assert body["seed"] == 7 and body["response_format"] == rf and body["stream"] is False
    assert gen.url == "http://h/v1/chat/completions"
    as_object = generate.request_body(
        generate.Generator("g", "http://h", "m", response_format="json_object"), [], rf
    )
    assert as_object["response_format"] == {"type": "json_object"}
    assert "response_format" not in generate.request_body(
        generate.Generator("g", "http://h", "m", response_format="none"), [], rf
    )


def test_parse_completion():
    ok = generate.parse_completion(
        200, json.dumps({"model": "x", "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]})
    )
    assert ok == {
        "ok": True,
        "http_status": 200,
        "reported_model": "x",
        "finish_reason": "stop",
        "content": "hi",
    }
    assert generate.parse_completion(500, "boom")["ok"] is False
    assert "not a chat completion" in generate.parse_completion(200, "<html>")["error"]
    refused = generate.parse_completion(
        200, json.dumps({"choices": [{"message": {"content": None, "refusal": "no"}}]})
    )
    assert refused["content"] == "" and "refusal: no" in refused["validation_errors"][0]


# ---------------------------------------------------------------- the call
class Server:
    """A chat-completions endpoint on 127.0.0.1 whose next reply the test sets: (status, body, delay)."""

    def __init__(self):
        self.reply = (200, json.dumps({"choices": [{"message": {"content": json.dumps(GOOD)}}]}), 0.0)
        self.seen: list[dict] = []
        self.stop = threading.Event()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.seen.append({"auth": self.headers.get("Authorization"), "body": json.loads(body)})
                status, text, delay = outer.reply
                if delay:
                    outer.stop.wait(delay)
                data = text.replace("{auth}", self.headers.get("Authorization") or "").encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def call(server, key=None, timeout=5.0, cancel=lambda: None):
    gen = generate.Generator(name="g", base_url=server.url, model="m", timeout_s=timeout)
    return generate.call(gen, [{"role": "user", "content": "q"}], None, api_key=key, check_cancel=cancel)


def test_a_reply_comes_back_validated_with_the_key_sent(server):
    out = call(server, key="sk-secret-123")
    assert out["ok"] and json.loads(out["content"]) == GOOD and out["validation_errors"] == []
    assert server.seen[0]["auth"] == "Bearer sk-secret-123" and server.seen[0]["body"]["model"] == "m"
    assert call(server)["ok"] and server.seen[1]["auth"] is None  # no key, no header


def test_the_key_is_scrubbed_from_what_comes_back(server):
    server.reply = (401, '{"error": "Incorrect API key provided: {auth}"}', 0)
    out = call(server, key="sk-secret-123")
    assert not out["ok"] and "HTTP 401" in out["error"] and "sk-secret-123" not in json.dumps(out)
    assert generate.REDACTED in out["error"]
    server.reply = (200, json.dumps({"choices": [{"message": {"content": "echo {auth}"}}]}), 0)
    out = call(server, key="sk-secret-123")
    assert "sk-secret-123" not in json.dumps(out)


def test_a_stalled_generator_gives_up_at_its_timeout(server):
    server.reply = (200, "{}", 30)
    t0 = time.monotonic()
    out = call(server, timeout=1)
    assert not out["ok"] and "no reply within 1 s" in out["error"]
    assert 0.9 <= time.monotonic() - t0 <= 1 + generate.GRACE_S + 0.5


def test_a_cancel_ends_the_wait(server):
    server.reply = (200, "{}", 30)

    class Cancelled(Exception):
        pass

    t0 = time.monotonic()
    calls = []

    def cancel():
        calls.append(1)
        if time.monotonic() - t0 > 0.3:
            raise Cancelled

    with pytest.raises(Cancelled):
        call(server, timeout=20, cancel=cancel)
    assert time.monotonic() - t0 < 1.5 and len(calls) >= 3


def test_http_errors_and_refused_connections_are_unavailable(server):
    server.reply = (500, '{"error": {"message": "internal error"}}', 0)
    out = call(server)
    assert out == {
        "ok": False,
        "http_status": 500,
        "error": "HTTP 500: internal error",
        "elapsed_ms": out["elapsed_ms"],
    }
    gen = generate.Generator(name="g", base_url="http://127.0.0.1:9/v1", model="m", timeout_s=5)
    out = generate.call(gen, [], None, api_key=None, check_cancel=lambda: None)
    assert not out["ok"] and "Connect" in out["error"]


# ---------------------------------------------------------------- the support model
def test_minilm_similarity_takes_the_best_quote_or_all_joined():
    vocab = ["a", "b", "c"]

    def encode(texts):  # one axis per word: a text's vector counts its words
        return np.array([[t.split().count(w) for w in vocab] for t in texts], dtype=float)

    model = support.default_model(encode)
    assert isinstance(model, support.MiniLMSimilarity)
    scores = model.scores([("a", ["a"]), ("a b", ["a", "b"]), ("a", ["c"]), ("a", []), ("", ["a"])])
    assert scores[0] == pytest.approx(1.0)
    assert scores[1] == pytest.approx(1.0)  # "a b" against the quotes joined
    assert scores[2] == 0.0 and scores[3] is None and scores[4] is None


def test_errors_quote_a_json_error_message_but_no_other_body():
    """A generator's URL may name any service the server reaches: only an OpenAI-style error message is quoted
    into the evidence, never another body (an internal service's answer to a POST)."""
    secret = "<html>internal admin page: token=abc123</html>"
    assert generate.parse_completion(404, secret)["error"] == (
        f"HTTP 404: a body of {len(secret)} bytes that is no JSON error message"
    )
    assert "abc123" not in generate.parse_completion(200, secret)["error"]
    assert "abc123" not in generate.parse_completion(200, json.dumps({"token": "abc123"}))["error"]
    msg = json.dumps({"error": {"message": "model  'x' not\nfound", "type": "invalid_request_error"}})
    assert generate.parse_completion(404, msg)["error"] == "HTTP 404: model 'x' not found"
    assert (
        generate.parse_completion(500, json.dumps({"error": "overloaded"}))["error"] == "HTTP 500: overloaded"
    )
    assert generate.parse_completion(400, json.dumps({"message": "bad"}))["error"] == "HTTP 400: bad"
