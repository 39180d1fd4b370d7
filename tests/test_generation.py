"""Generated answers held to proof (docs/generation.md), through both paths, as non-superuser roles.

- database path: rag.ask(..., options => {"generator": name}); pgcite_python calls the generator.
- caller path: Client.ask(..., generate=callable) over rag.context / rag.answer (bring your own generator).

The only test double is tests/chat_server.py: a local HTTP server on 127.0.0.1 speaking the chat-completions
protocol, answering from scripts that quote the sources of the prompt pgcite sent. Every scripted case asserts
exactly what the caller receives and what the audit log holds, and that nothing fabricated reaches the caller.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from chat_server import ChatServer, Reply, cited, first_sentence, sources_of
from conftest import MANUAL, TINY_FILES, create_database, drop_database, drop_database_and_roles, sqlstate_of

from pgcite import Client

SFX = uuid.uuid4().hex[:6]
R = {k: f"gen_{k}_{SFX}" for k in ("reader", "writer", "admin", "other", "nobody")}
QUESTION = "How do I prevent transaction ID wraparound failures?"
OUT_OF_CORPUS = "What is the capital of Australia?"
SECRET = "The launch code of tenant other is pelican-orange-42 and only its members may read it."
FABRICATED = "VACUUM reclaims all disk space every Tuesday at noon without taking any lock."
UNSUPPORTED = "The moon is made of green cheese and orbits Jupiter every Tuesday."
DEFAULT_VENV = "/opt/pgcite/venv"


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def gdb(pg):
    """A database of this module: tenant docs (routine vacuuming; reader and writer), tenant other (a secret;
    its own reader), tenant replay (a small document the replay test changes)."""
    if not (MANUAL / TINY_FILES[0]).is_file():
        pytest.skip("PostgreSQL manual (postgresql-doc) not installed")
    name = f"pgcite_gen_{SFX}"
    drop_database(pg, name)
    create_database(pg, name)
    with pg.admin(name) as c:
        venv = os.environ.get("PGCITE_DB_VENV", DEFAULT_VENV)
        if venv != DEFAULT_VENV:  # settings live in the database (as Cluster.ensure_database does)
            c.execute("SELECT rag.set_config('python_path', %s)", (venv,))
        c.execute(f"CREATE ROLE {R['reader']} LOGIN IN ROLE pgcite_reader")
        c.execute(f"CREATE ROLE {R['writer']} LOGIN IN ROLE pgcite_writer")
        c.execute(f"CREATE ROLE {R['admin']} LOGIN IN ROLE pgcite_admin")
        c.execute(f"CREATE ROLE {R['other']} LOGIN IN ROLE pgcite_reader")
        c.execute(f"CREATE ROLE {R['nobody']} LOGIN")
        for tenant in ("docs", "other", "replay"):
            c.execute("SELECT rag.create_tenant(%s)", (tenant,))
        for tenant, role in (
            ("docs", "reader"),
            ("docs", "writer"),
            ("other", "other"),
            ("replay", "reader"),
        ):
            c.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, R[role]))
        c.execute("SELECT rag.grant_tenant('replay', %s)", (R["writer"],))
        for f in TINY_FILES[:1]:  # routine-vacuuming.html: what QUESTION is answered from
            c.execute(
                "SELECT * FROM rag.ingest('docs', %s, %s, 'html')",
                (f, (MANUAL / f).read_text(encoding="utf-8")),
            )
        c.execute("SELECT * FROM rag.ingest('other', 'secret.md', %s)", (f"# Launch codes\n\n{SECRET}\n",))
        c.execute("SELECT * FROM rag.ingest('replay', 'r.md', %s)", (REPLAY_DOC,))
    yield name
    close_sessions()
    drop_database_and_roles(pg, name, R.values())


_SESSIONS: dict[tuple[str, str], psycopg.Connection] = {}


@contextlib.contextmanager
def connect(pg, db, role) -> Iterator[psycopg.Connection]:
    """This module's one session of a role in autocommit: a backend loads the embedding model once, so every
    test after the first of a role runs at the speed of an ask, not of a model load."""
    c = _SESSIONS.get((db, role))
    if c is None or c.closed:
        c = _SESSIONS[(db, role)] = psycopg.connect(dsn_of(pg, db, role), autocommit=True)
    yield c


def close_sessions() -> None:
    for c in _SESSIONS.values():
        c.close()
    _SESSIONS.clear()


def dsn_of(pg, db, role) -> str:
    return psycopg.conninfo.make_conninfo(pg.dsn(db), user=role)


@pytest.fixture(scope="module")
def other_chunk(pg, gdb) -> int:
    with pg.admin(gdb) as c:
        return c.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'other'").fetchone()[0]


# ---------------------------------------------------------------- scripts (the model's behaviours)
def s12(req: dict) -> tuple[str, str]:
    return first_sentence(req, 1), first_sentence(req, 2)


def correct(req, attempt):
    s1, s2 = s12(req)
    return Reply(cited(f"{s1} [1] {s2} [2]", [{"n": 1, "quote": s1}, {"n": 2, "quote": s2}]))


def expect_correct(req):
    s1, s2 = s12(req)
    return f"{s1} [1] {s2} [2]", [(1, s1), (2, s2)]


def quote_not_in_source(req, attempt):
    s1 = first_sentence(req, 1)
    return Reply(cited(f"{s1} [1]", [{"n": 1, "quote": FABRICATED}]))


def n_out_of_range(req, attempt):
    s1 = first_sentence(req, 1)
    return Reply(cited(f"{s1} [9]", [{"n": 9, "quote": s1}]))


def unsupported_sentence(req, attempt):
    s1 = first_sentence(req, 1)
    return Reply(cited(f"{s1} [1] {UNSUPPORTED} [1]", [{"n": 1, "quote": s1}]))


def one_bad_citation(req, attempt):
    s1, s2 = s12(req)
    return Reply(
        cited(
            f"{s1} [1] {s2} [2][3]",
            [{"n": 1, "quote": s1}, {"n": 2, "quote": s2}, {"n": 3, "quote": FABRICATED}],
        )
    )


def invalid_then_valid(req, attempt):
    return Reply("Sure! Here is the answer: {not json") if attempt == 1 else correct(req, attempt)


def invalid_twice(req, attempt):
    return Reply("I think the answer is to run VACUUM regularly.")


def model_abstains(req, attempt):
    return Reply(cited(None, [], True, "The sources do not say how to do this."))


def stall(req, attempt):
    return Reply(delay=30, content=correct(req, attempt).content)


def http_500(req, attempt):
    return Reply(status=500, body='{"error": {"message": "internal server error"}}')


def smuggler(kind: str, other_id: int) -> Callable:
    def script(req, attempt):
        s1 = first_sentence(req, 1)
        if kind == "chunk_id":  # a citation that names a chunk of another tenant directly
            return Reply(cited(f"{s1} [1]", [{"n": 1, "quote": s1, "chunk_id": other_id}]))
        if kind == "quote":  # another tenant's text as the quote of a source of this call
            return Reply(cited("The launch code is pelican-orange-42 [1].", [{"n": 1, "quote": SECRET}]))
        return Reply(cited(f"{s1} [{other_id}]", [{"n": other_id, "quote": SECRET}]))  # its chunk id as n

    return script


@dataclass
class Case:
    script: str
    status: str
    reason: str | None
    attempts: int  # requests the model receives
    rejected: frozenset = frozenset()  # why of the citations the log says were rejected
    expect: Callable | None = None  # request -> (answer, [(n, quote)])
    timeout_s: float = 20
    outcome_errors: tuple = ()  # strings the retry message (errors of attempt 1) contains


CASES = {
    "correct": Case("correct", "answered", None, 1, expect=expect_correct),
    "quote_not_in_source": Case(
        "quote_not_in_source",
        "abstained",
        "citation_unverifiable",
        2,
        frozenset({"quote_not_in_source"}),
        outcome_errors=("does not occur in source 1",),
    ),
    "n_out_of_range": Case(
        "n_out_of_range",
        "abstained",
        "citation_unverifiable",
        2,
        frozenset({"n_out_of_range"}),
        outcome_errors=("names no source",),
    ),
    "unsupported_sentence": Case(
        "unsupported_sentence",
        "abstained",
        "unsupported_claim",
        2,
        outcome_errors=("is not supported by the quotes of [1]",),
    ),
    "one_bad_citation": Case(
        "one_bad_citation", "answered", None, 1, frozenset({"quote_not_in_source"}), expect=expect_correct
    ),
    "invalid_then_valid": Case(
        "invalid_then_valid", "answered", None, 2, expect=expect_correct, outcome_errors=("not valid JSON",)
    ),
    "invalid_twice": Case("invalid_twice", "abstained", "generator_invalid_output", 2),
    "model_abstains": Case("model_abstains", "abstained", "generator_abstained", 1),
    "stall": Case("stall", "abstained", "generator_unavailable", 1, timeout_s=2),
    "http_500": Case("http_500", "abstained", "generator_unavailable", 1),
    "smuggle_chunk_id": Case(
        "smuggle_chunk_id",
        "abstained",
        "generator_invalid_output",
        2,
        outcome_errors=('unknown key "chunk_id"',),
    ),
    "smuggle_quote": Case(
        "smuggle_quote", "abstained", "citation_unverifiable", 2, frozenset({"quote_not_in_source"})
    ),
    "smuggle_n": Case("smuggle_n", "abstained", "citation_unverifiable", 2, frozenset({"n_out_of_range"})),
}


@pytest.fixture(scope="module")
def server(pg, gdb, other_chunk):
    srv = ChatServer().start()
    scripts = {
        "correct": correct,
        "quote_not_in_source": quote_not_in_source,
        "n_out_of_range": n_out_of_range,
        "unsupported_sentence": unsupported_sentence,
        "one_bad_citation": one_bad_citation,
        "invalid_then_valid": invalid_then_valid,
        "invalid_twice": invalid_twice,
        "model_abstains": model_abstains,
        "stall": stall,
        "http_500": http_500,
        "smuggle_chunk_id": smuggler("chunk_id", other_chunk),
        "smuggle_quote": smuggler("quote", other_chunk),
        "smuggle_n": smuggler("n", other_chunk),
    }
    with connect(pg, gdb, R["admin"]) as c:
        for name, script in scripts.items():
            url = srv.add(name, script)
            c.execute(
                "SELECT rag.create_generator(%s, %s, %s, timeout_s => %s)",
                (name, url, f"scripted-{name}", CASES[name].timeout_s),
            )
        # long stalls for the cancel tests
        c.execute(
            "SELECT rag.create_generator('stall_long', %s, 'scripted-stall', timeout_s => 60)",
            (srv.add("stall_long", stall),),
        )
    yield srv
    srv.stop()


# ---------------------------------------------------------------- the two paths
def http_generate(srv: ChatServer, name: str, timeout: float) -> Callable:
    """The caller's own generator: the same scripted model, reached with urllib (timeout as configured)."""

    def generate(request: dict) -> str:
        body = json.dumps({"model": f"byo-{name}", "temperature": 0, **request}).encode()
        req = urllib.request.Request(
            srv.url(name) + "/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)["choices"][0]["message"]["content"]

    return generate


def ask(pg, db, srv, path: str, name: str, question: str = QUESTION, tenant: str = "docs", role="reader"):
    """One question through one path: (row as rag.ask returns it, seconds, the requests the model got)."""
    n0 = len(srv.requests)
    t0 = time.monotonic()
    if path == "database":
        with connect(pg, db, R[role]) as c:
            cur = c.execute(
                "SELECT * FROM rag.ask(%s, %s, options => %s)",
                (question, tenant, json.dumps({"generator": name})),
            )
            row = dict(zip([d.name for d in cur.description], cur.fetchone(), strict=True))
    else:
        with connect(pg, db, R[role]) as c, Client.from_connection(c) as client:
            a = client.ask(
                question,
                tenant,
                generate=http_generate(srv, name, CASES[name].timeout_s),
                generator_name=name,
            )
        row = a.to_dict()
    return row, time.monotonic() - t0, srv.requests[n0:]


def log_row(pg, db, ask_id: int, role="reader") -> dict:
    with connect(pg, db, R[role]) as c:
        cur = c.execute(
            "SELECT status, reason, answer, citations, evidence, role_name FROM rag.ask_log"
            " WHERE ask_id = %s",
            (ask_id,),
        )
        return dict(zip([d.name for d in cur.description], cur.fetchone(), strict=True))


def by_n(citations: list[dict]) -> list[dict]:
    return sorted(citations, key=lambda c: (c["n"], c["quote_start"]))


def chunk_text(pg, db, chunk_id: int) -> str:
    with pg.admin(db) as c:
        return c.execute("SELECT content FROM rag.chunk WHERE chunk_id = %s", (chunk_id,)).fetchone()[0]


# ---------------------------------------------------------------- every scripted case, both paths
@pytest.mark.parametrize("path", ["database", "caller"])
@pytest.mark.parametrize("case", list(CASES))
def test_scripted_generator(pg, gdb, server, other_chunk, case, path):
    c = CASES[case]
    row, seconds, requests = ask(pg, gdb, server, path, case)
    # the model was asked exactly as often as the case says (once, or once more with the errors)
    assert len(requests) == c.attempts, [r["body"]["messages"][-1]["content"][:200] for r in requests]
    first = requests[0]["body"]
    sources = sources_of(first)
    assert sorted(sources) == [1, 2, 3, 4, 5]  # the k retrieved chunks, numbered
    if c.attempts == 2:
        retry = requests[1]["body"]["messages"]
        assert retry[:2] == first["messages"] and retry[2]["role"] == "assistant"
        assert retry[3]["content"].startswith("Your reply was rejected:")
        for text in c.outcome_errors:
            assert text in retry[3]["content"]

    # what the caller receives
    assert (row["status"], row["reason"]) == (c.status, c.reason)
    if c.status == "answered":
        answer, quotes = c.expect(first)
        assert row["answer"] == answer
        cites = by_n(row["citations"])
        assert [(x["n"], x["quote"]) for x in cites] == quotes
        chunk_of = {s["n"]: s["chunk_id"] for s in row["evidence"]["generation"]["sources"]}
        for x in cites:
            assert x["verified"] is True and x["chunk_id"] == chunk_of[x["n"]]
            assert chunk_text(pg, gdb, x["chunk_id"])[x["quote_start"] : x["quote_end"]] == x["quote"]
    else:
        assert row["answer"] is None and row["citations"] == []
    # nothing the checks removed reaches the caller: not in the answer, the citations, nor the evidence
    received = json.dumps(row, ensure_ascii=False)
    for fabricated in (FABRICATED, UNSUPPORTED, "green cheese", "pelican", SECRET):
        assert fabricated not in received
    for marker in ("[3]", "[9]", f"[{other_chunk}]"):
        assert marker not in (row["answer"] or "")
    assert other_chunk not in [x["chunk_id"] for x in row["citations"]]
    assert other_chunk not in [x["chunk_id"] for x in row["evidence"]["chunks"]]
    if case == "stall":
        assert c.timeout_s - 0.2 <= seconds <= c.timeout_s + 3  # abstains in about the configured time

    # what the log holds
    log = log_row(pg, gdb, row["ask_id"])
    assert (log["status"], log["reason"], log["answer"]) == (row["status"], row["reason"], row["answer"])
    assert by_n(log["citations"]) == by_n(row["citations"]) and log["role_name"] == R["reader"]
    gen = log["evidence"]["generation"]
    assert gen["path"] == path and gen["generator"] == case and gen["called"] is True
    if path == "database":
        assert gen["model"] == f"scripted-{case}"
    assert gen["outcome"] == (c.reason or "answered")
    assert [s["chunk_id"] for s in gen["sources"]] == [x["chunk_id"] for x in log["evidence"]["chunks"]]
    attempts = gen["attempts"]
    assert len(attempts) == c.attempts
    for attempt, request in zip(attempts, requests, strict=True):
        sent = request["reply"]
        if sent.status == 200 and not sent.delay:
            assert attempt["raw"] == sent.content  # each raw reply, as the model sent it
        else:
            assert attempt.get("raw") is None and attempt["error"]  # why the generator was unavailable
    assert {x["why"] for a in attempts for x in a.get("rejected", [])} == set(c.rejected)
    if c.attempts == 2:
        assert attempts[0]["errors"] and attempts[0]["outcome"] == (
            "generator_invalid_output" if case == "invalid_then_valid" else c.reason
        )
    if case == "model_abstains":
        assert gen["model_abstain_reason"] == "The sources do not say how to do this."
    if case == "one_bad_citation":
        assert [x["n"] for x in attempts[0]["rejected"]] == [3]
    if case == "http_500":
        assert "500" in attempts[0]["error"]
    # the caller's row says how each attempt ended, by number only
    assert [a["outcome"] for a in row["evidence"]["generation"]["attempts"]] == [
        a["outcome"] for a in attempts
    ]


def test_a_question_the_gate_refuses_never_reaches_the_model(pg, gdb, server):
    for path in ("database", "caller"):
        row, _, requests = ask(pg, gdb, server, path, "correct", question=OUT_OF_CORPUS)
        assert (row["status"], row["reason"], row["answer"], row["citations"]) == (
            "abstained",
            "no_relevant_sources",
            None,
            [],
        )
        assert requests == []
        gen = log_row(pg, gdb, row["ask_id"])["evidence"]["generation"]
        assert gen["called"] is False


def test_the_extractive_answer_stays_the_default(pg, gdb, server):
    with connect(pg, gdb, R["reader"]) as c:
        plain = c.execute(
            "SELECT status, answer, citations, evidence FROM rag.ask(%s, 'docs')", (QUESTION,)
        ).fetchone()
        empty = c.execute(
            "SELECT status, answer, citations, evidence FROM rag.ask(%s, 'docs', options => '{}')",
            (QUESTION,),
        ).fetchone()
    assert plain[0] == "answered" and "generation" not in plain[3]
    assert plain[:3] == empty[:3] and plain[3]["fingerprint"] == empty[3]["fingerprint"]
    assert all(c["quote"] + f" [{c['n']}]" in plain[1] for c in plain[2])  # verbatim quotes, as before


# ---------------------------------------------------------------- cancel and timeouts
def test_statement_timeout_ends_the_wait(pg, gdb, server):
    with connect(pg, gdb, R["reader"]) as c:
        c.execute("SET statement_timeout = '1s'")
        t0 = time.monotonic()
        try:
            with pytest.raises(psycopg.errors.QueryCanceled):
                c.execute(
                    "SELECT * FROM rag.ask(%s, 'docs', options => '{\"generator\": \"stall_long\"}')",
                    (QUESTION,),
                )
            assert time.monotonic() - t0 < 4
        finally:
            c.execute("RESET statement_timeout")


def test_pg_cancel_backend_ends_the_wait(pg, gdb, server):
    outcome = {}
    with connect(pg, gdb, R["reader"]) as c:
        pid = c.info.backend_pid

        def run():
            t0 = time.monotonic()
            try:
                c.execute(
                    "SELECT * FROM rag.ask(%s, 'docs', options => '{\"generator\": \"stall_long\"}')",
                    (QUESTION,),
                )
            except psycopg.Error as e:
                outcome["sqlstate"] = e.sqlstate
            outcome["seconds"] = time.monotonic() - t0

        t = threading.Thread(target=run)
        n0 = len(server.received("stall_long"))
        t.start()
        deadline = time.monotonic() + 20
        while len(server.received("stall_long")) == n0 and time.monotonic() < deadline:
            time.sleep(0.05)  # wait until the request is out: the backend is waiting for the model
        with pg.admin(gdb) as a:
            assert a.execute("SELECT pg_cancel_backend(%s)", (pid,)).fetchone()[0]
        t.join(20)
    assert outcome["sqlstate"] == "57014" and outcome["seconds"] < 20


def test_a_refused_connection_abstains_at_once(pg, gdb, server):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with connect(pg, gdb, R["admin"]) as c:
        c.execute(
            "SELECT rag.create_generator('refused', %s, 'nobody-home', timeout_s => 30)",
            (f"http://127.0.0.1:{port}/v1",),
        )
    with connect(pg, gdb, R["reader"]) as c:
        t0 = time.monotonic()
        row = c.execute(
            "SELECT status, reason, answer, citations, evidence FROM rag.ask(%s, 'docs', options => %s)",
            (QUESTION, '{"generator": "refused"}'),
        ).fetchone()
    assert row[:4] == ("abstained", "generator_unavailable", None, [])
    assert time.monotonic() - t0 < 5
    assert "Connect" in row[4]["generation"]["attempts"][0]["error"]


# ---------------------------------------------------------------- generators and the API key
def test_generators_are_managed_by_admins_and_listed_without_secrets(pg, gdb, server):
    url = server.url("correct")
    for role in ("reader", "writer", "nobody"):
        with connect(pg, gdb, R[role]) as c:
            with pytest.raises(psycopg.Error) as e:
                c.execute("SELECT rag.create_generator('x', %s, 'm')", (url,))
            assert sqlstate_of(e) == "42501"
            with pytest.raises(psycopg.Error) as e:
                c.execute("SELECT rag.drop_generator('correct')")
            assert sqlstate_of(e) == "42501"
    with connect(pg, gdb, R["admin"]) as c:
        bad = [
            ("bad name!", url, "m", None, "{}"),
            ("g", "http://user:secret@127.0.0.1:1/v1", "m", None, "{}"),  # no credentials in a URL
            ("g", "http://127.0.0.1:1/v1?key=secret", "m", None, "{}"),
            ("g", "file:///etc/passwd", "m", None, "{}"),
            ("g", url, "m", "HOME", "{}"),  # only PGCITE_* variables: no other server variable leaves
            ("g", url, "m", None, '{"messages": []}'),  # pgcite sets messages, model, max_tokens...
            ("g", url, "m", None, "[]"),
        ]
        for name, base_url, model, env, options in bad:
            with pytest.raises(psycopg.Error) as e:
                c.execute(
                    "SELECT rag.create_generator(%s, %s, %s, api_key_env => %s, options => %s::jsonb)",
                    (name, base_url, model, env, options),
                )
            assert sqlstate_of(e) == "22023", (name, base_url, env, options)
        c.execute("SELECT rag.create_generator('temp', %s, 'm', options => '{\"seed\": 7}')", (url,))
        assert c.execute("SELECT rag.drop_generator('temp')").fetchone()[0] is True
        assert c.execute("SELECT rag.drop_generator('temp')").fetchone()[0] is False
    with connect(pg, gdb, R["reader"]) as c:
        listed = {r[0]: r for r in c.execute("SELECT name, base_url, model, api_key_env FROM rag.generators")}
        assert listed["correct"][1:] == (url, "scripted-correct", None)
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.generator")
        assert sqlstate_of(e) == "42501"
        # the call itself is rag.ask's alone: a reader cannot aim it anywhere or use it as a free model
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT rag._generator_call('correct', '{\"messages\": []}')")
        assert sqlstate_of(e) == "42501"
        with pytest.raises(psycopg.Error) as e:
            c.execute(
                "SELECT * FROM rag.ask(%s, 'docs', options => '{\"generator\": \"nope\"}')", (QUESTION,)
            )
        assert sqlstate_of(e) == "22023"
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.ask(%s, 'docs', options => '{\"generator\": 1}')", (QUESTION,))
        assert sqlstate_of(e) == "22023"


def every_readable_text(conn) -> str:
    """Every row of every relation of schema rag this role may read, as text."""
    rels = [
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_class AS c WHERE c.relnamespace = 'rag'::regnamespace"
            " AND c.relkind IN ('r', 'v') AND has_table_privilege(c.oid, 'SELECT') ORDER BY 1"
        )
    ]
    texts = []
    for rel in rels:
        cols = [
            r[0]
            for r in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
                " AND NOT attisdropped AND has_column_privilege(attrelid, attnum, 'SELECT')",
                (f"rag.{rel}",),
            )
        ]
        select = ", ".join(f'"{c}"::text' for c in cols)
        texts += [json.dumps(list(r)) for r in conn.execute(f"SELECT {select} FROM rag.{rel}")]
    return "\n".join(texts)


def test_the_api_key_is_sent_but_never_readable(pg, gdb, server):
    key = os.environ.get("PGCITE_TEST_API_KEY")
    if not key:
        pytest.skip("PGCITE_TEST_API_KEY is not set (start the server with it, as conftest's cluster is)")

    def key_echo(req, attempt):  # an endpoint that rejects the key and repeats it, as some APIs do
        return Reply(
            status=401, body=json.dumps({"error": {"message": f"Incorrect API key: {req['_authorization']}"}})
        )

    with pg.admin(gdb) as c:  # a superuser lets this database's generators use these variables
        c.execute(
            "SELECT rag.set_config('generator_key_envs', 'PGCITE_TEST_API_KEY, PGCITE_TEST_NO_SUCH_VAR')"
        )
    with connect(pg, gdb, R["admin"]) as c:
        for name, script in (("keyed", correct), ("key_echo", key_echo)):
            c.execute(
                "SELECT rag.create_generator(%s, %s, 'scripted-keyed', api_key_env => 'PGCITE_TEST_API_KEY')",
                (name, server.add(name, script)),
            )
        c.execute(
            "SELECT rag.create_generator('key_unset', %s, 'm', api_key_env => 'PGCITE_TEST_NO_SUCH_VAR')",
            (server.url("correct"),),
        )
    ok, _, requests = ask(pg, gdb, server, "database", "keyed")
    assert ok["status"] == "answered" and requests[0]["authorization"] == f"Bearer {key}"
    echo, _, requests = ask(pg, gdb, server, "database", "key_echo")
    assert requests[0]["authorization"] == f"Bearer {key}"
    assert (echo["status"], echo["reason"]) == ("abstained", "generator_unavailable")
    error = log_row(pg, gdb, echo["ask_id"])["evidence"]["generation"]["attempts"][0]["error"]
    assert "HTTP 401" in error and "[redacted]" in error and key not in error
    unset, _, requests = ask(pg, gdb, server, "database", "key_unset")
    assert requests == [] and unset["reason"] == "generator_unavailable"
    assert "PGCITE_TEST_NO_SUCH_VAR" in unset["evidence"]["generation"]["attempts"][0]["error"]
    assert key not in json.dumps([ok, echo, unset])
    # nowhere a reader or an admin can look, and nowhere in the database at all
    for role in ("reader", "admin"):
        with connect(pg, gdb, R[role]) as c:
            text = every_readable_text(c)
            assert "keyed" in text and key not in text
    with pg.admin(gdb) as c:
        assert key not in every_readable_text(c)
        settings = c.execute("SELECT string_agg(setting, ' ') FROM pg_settings").fetchone()[0]
        assert key not in settings


# ---------------------------------------------------------------- bring your own generator
def test_a_context_answers_once_and_only_for_its_tenant(pg, gdb, server):
    with connect(pg, gdb, R["reader"]) as c:
        ctx = c.execute(
            "SELECT context_id, status, sources, prompt FROM rag.context(%s, 'docs')", (QUESTION,)
        ).fetchone()
        assert ctx[1] == "ready" and [s["n"] for s in ctx[2]] == [1, 2, 3, 4, 5]
        assert ctx[3]["response_format"]["json_schema"]["name"] == "CitedAnswer"
        reply = correct(ctx[3], 1).content
    # a reader of another tenant cannot use it, and learns nothing about it
    with connect(pg, gdb, R["other"]) as c:
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.answer(%s, %s::jsonb)", (ctx[0], json.dumps(reply)))
        assert sqlstate_of(e) == "42704" and "docs" not in str(e.value)
        assert (
            c.execute("SELECT count(*) FROM rag.context WHERE context_id = %s", (ctx[0],)).fetchone()[0] == 0
        )
    with connect(pg, gdb, R["nobody"]) as c:
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.answer(%s, %s::jsonb)", (ctx[0], json.dumps(reply)))
        assert sqlstate_of(e) == "42501"
    with connect(pg, gdb, R["reader"]) as c:
        first = c.execute(
            "SELECT ask_id, status FROM rag.answer(%s, %s::jsonb, 'mine')", (ctx[0], json.dumps(reply))
        ).fetchone()
        assert first[1] == "answered"
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.answer(%s, %s::jsonb)", (ctx[0], json.dumps(reply)))
        assert sqlstate_of(e) == "55000"
        answered = c.execute(
            "SELECT ask_id, answered_at IS NOT NULL FROM rag.context WHERE context_id = %s", (ctx[0],)
        )
        assert answered.fetchone() == (first[0], True)
        with pytest.raises(psycopg.Error) as e:
            c.execute(
                "SELECT * FROM rag.context(%s, 'docs', options => '{\"generator\": \"correct\"}')",
                (QUESTION,),
            )
        assert sqlstate_of(e) == "22023"
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.context(%s, 'other')", (QUESTION,))
        assert sqlstate_of(e) == "42501"
        # nothing to generate from: abstained at once, and logged
        for question, reason in (("  ", "empty_question"), (OUT_OF_CORPUS, "no_relevant_sources")):
            row = c.execute(
                "SELECT context_id, ask_id, status, reason, sources, prompt FROM rag.context(%s, 'docs')",
                (question,),
            ).fetchone()
            assert row[0] is None and row[1] is not None and row[2:] == ("abstained", reason, [], None)
            assert log_row(pg, gdb, row[1])["reason"] == reason


def test_the_caller_path_retries_once_then_decides(pg, gdb, server):
    """rag.answer by hand: status retry with the errors and the messages for the model, then final."""
    with connect(pg, gdb, R["reader"]) as c:
        ctx = c.execute("SELECT context_id, prompt FROM rag.context(%s, 'docs')", (QUESTION,)).fetchone()
        first = c.execute(
            "SELECT * FROM rag.answer(%s, %s::jsonb)", (ctx[0], json.dumps("not json"))
        ).fetchone()
        assert first[:5] == (None, "retry", None, "generator_invalid_output", [])
        retry = first[5]["retry"]
        assert retry["messages"][:2] == ctx[1]["messages"] and retry["messages"][2]["content"] == "not json"
        assert "not valid JSON" in retry["messages"][3]["content"]
        assert (
            c.execute(
                "SELECT count(*) FROM rag.ask_log WHERE evidence ->> 'context_id' = %s", (str(ctx[0]),)
            ).fetchone()[0]
            == 0
        )
        second = c.execute(
            "SELECT ask_id, status, reason FROM rag.answer(%s, %s::jsonb)",
            (ctx[0], json.dumps(invalid_twice({}, 2).content)),
        ).fetchone()
        assert second[1:] == ("abstained", "generator_invalid_output")
        gen = log_row(pg, gdb, second[0])["evidence"]["generation"]
        assert [a["raw"] for a in gen["attempts"]] == ["not json", invalid_twice({}, 2).content]
        # a generator that failed is recorded as such
        ctx = c.execute("SELECT context_id FROM rag.context(%s, 'docs')", (QUESTION,)).fetchone()
        failed = c.execute(
            "SELECT status, reason, evidence FROM rag.answer(%s, NULL, 'mine', 'TimeoutError: 30 s')",
            (ctx[0],),
        ).fetchone()
        assert failed[:2] == ("abstained", "generator_unavailable")
        assert failed[2]["generation"]["attempts"][0]["error"] == "TimeoutError: 30 s"


def test_bring_your_own_works_without_plpython(pg, fresh_db):
    """Managed PostgreSQL: pgcite alone, embeddings from the caller, support judged lexically."""
    e1 = json.dumps([1.0] + [0.0] * 383)
    quote = "The autovacuum daemon removes dead row versions in the background."
    role = f"gen_core_{SFX}"
    with pg.admin(fresh_db) as c:
        c.execute("CREATE EXTENSION pgcite CASCADE")
        c.execute("SELECT rag.create_tenant('core')")
        items = json.dumps([{"content": quote, "embedding": json.loads(e1), "title": "Autovacuum"}])
        c.execute("SELECT * FROM rag.store_document('core', 'a.md', %s)", (items,))
        c.execute(f"CREATE ROLE {role} LOGIN IN ROLE pgcite_reader")
        c.execute("SELECT rag.grant_tenant('core', %s)", (role,))
        c.execute("SELECT rag.create_generator('g', 'http://127.0.0.1:9/v1', 'm')")
    try:
        with psycopg.connect(dsn_of(pg, fresh_db, role), autocommit=True) as c:
            # a configured generator needs pgcite_python to be called from the database
            with pytest.raises(psycopg.Error) as e:
                c.execute(
                    "SELECT * FROM rag.ask('What removes dead row versions?', 'core', 1, %s::vector, %s)",
                    (e1, '{"generator": "g"}'),
                )
            assert sqlstate_of(e) == "55000" and "rag.context" in e.value.diag.message_hint
            with Client(dsn_of(pg, fresh_db, role)) as client:
                a = client.ask(
                    "What removes dead row versions?",
                    "core",
                    k=1,
                    query_embedding=json.loads(e1),
                    generate=lambda request: cited(f"{quote} [1]", [{"n": 1, "quote": quote}]),
                )
            assert a.status == "answered" and a.answer == f"{quote} [1]"
            evidence = c.execute(
                "SELECT evidence FROM rag.ask_log WHERE ask_id = %s", (a.ask_id,)
            ).fetchone()[0]
            claim = evidence["generation"]["attempts"][0]["claims"][0]
            assert claim["similarity"] is None and claim["lexical"] == 1 and claim["supported"] is True
    finally:
        with pg.admin() as adm:
            adm.execute(f"DROP DATABASE IF EXISTS {fresh_db} WITH (FORCE)")
            adm.execute(f"DROP ROLE IF EXISTS {role}")


# ---------------------------------------------------------------- replay
REPLAY_DOC = (
    "# Freezing\n\nVACUUM freezes old row versions so that transaction ID wraparound cannot make them "
    "invisible.\n\nThe autovacuum daemon runs these freezing passes in the background when tables get old.\n"
)
REPLAY_Q = "How does VACUUM prevent transaction ID wraparound?"


def test_replay_rechecks_the_stored_reply_without_calling_the_model(pg, gdb, server):
    def replay_script(req, attempt):
        quote = (
            "VACUUM freezes old row versions so that transaction ID wraparound cannot make them invisible."
        )
        n = next(n for n, text in sources_of(req).items() if quote in text)
        return Reply(cited(f"{quote} [{n}]", [{"n": n, "quote": quote}]))

    with connect(pg, gdb, R["admin"]) as c:
        c.execute(
            "SELECT rag.create_generator('replayed', %s, 'scripted-replay')",
            (server.add("replayed", replay_script),),
        )
    answers = []
    for path in ("database", "caller"):
        row, _, requests = (
            ask(pg, gdb, server, path, "replayed", question=REPLAY_Q, tenant="replay")
            if path == "database"
            else _ask_caller_replay(pg, gdb, server)
        )
        assert row["status"] == "answered", row
        answers.append(row)
    n0 = len(server.requests)
    with connect(pg, gdb, R["reader"]) as c:
        for row in answers:
            r = c.execute(
                "SELECT identical, citations_identical, status_now, citations_verify, recheck"
                " FROM rag.replay(%s)",
                (row["ask_id"],),
            ).fetchone()
            assert r[:4] == (True, True, "answered", True), r[4]
    # the document changes: the quoted sentence is no longer in today's chunks as quoted
    with connect(pg, gdb, R["writer"]) as c:
        c.execute(
            "SELECT * FROM rag.ingest('replay', 'r.md', %s)",
            # every word stays (so today's gate still passes), but the quote no longer occurs verbatim
            (REPLAY_DOC.replace("row versions so that", "row versions, so that"),),
        )
    with connect(pg, gdb, R["reader"]) as c:
        for row in answers:
            r = c.execute(
                "SELECT identical, status_now, citations_verify, recheck FROM rag.replay(%s)",
                (row["ask_id"],),
            ).fetchone()
            assert r[0] is False and r[2] is False and r[3]["checked"] is True
            assert r[1] == "abstained" and r[3]["reason"] == "citation_unverifiable"
    assert len(server.requests) == n0  # the model was never called again


def _ask_caller_replay(pg, gdb, server):
    n0 = len(server.requests)
    with connect(pg, gdb, R["reader"]) as c, Client.from_connection(c) as client:
        a = client.ask(
            REPLAY_Q, "replay", generate=http_generate(server, "replayed", 10), generator_name="byo"
        )
    return a.to_dict(), 0.0, server.requests[n0:]


def test_the_log_of_generated_answers_verifies(pg, gdb, server):
    with connect(pg, gdb, R["reader"]) as c:
        for tenant in ("docs", "replay"):
            ok, checked, *_ = c.execute("SELECT * FROM rag.verify_log(%s)", (tenant,)).fetchone()
            assert ok and checked > 0


# ---------------------------------------------------------------- the CLI and the async client
def test_cli_ask_with_a_generator(pg, gdb, server):
    import io

    from pgcite import cli

    out, err = io.StringIO(), io.StringIO()
    code = cli.main(
        [
            "--dsn",
            dsn_of(pg, gdb, R["reader"]),
            "ask",
            QUESTION,
            "--tenant",
            "docs",
            "--generator",
            "correct",
        ],
        out,
        err,
    )
    assert code == cli.EXIT_OK, err.getvalue()
    text = out.getvalue()
    assert "generated by correct (scripted-correct) in 1 attempt\n" in text and "verified" in text
    out = io.StringIO()
    code = cli.main(
        [
            "--dsn",
            dsn_of(pg, gdb, R["reader"]),
            "ask",
            QUESTION,
            "--tenant",
            "docs",
            "--generator",
            "unsupported_sentence",
            "--json",
        ],
        out,
        err,
    )
    assert code == cli.EXIT_ABSTAINED
    doc = json.loads(out.getvalue())
    assert (doc["status"], doc["reason"], doc["answer"]) == ("abstained", "unsupported_claim", None)
    assert UNSUPPORTED not in out.getvalue()


def test_async_client_with_a_coroutine_generator(pg, gdb, server):
    import asyncio

    from pgcite import AsyncClient

    sync_generate = http_generate(server, "one_bad_citation", 10)

    async def generate(request):
        return await asyncio.to_thread(sync_generate, request)

    async def run():
        async with await AsyncClient.connect(dsn_of(pg, gdb, R["reader"])) as client:
            return await client.ask(QUESTION, "docs", generate=generate)

    a = asyncio.run(run())
    assert a.status == "answered" and "[3]" not in a.answer and [c.n for c in a.citations] == [1, 2]
    assert a.generation["generator"] == "generate" and a.generation["attempts"][0]["rejected"] == [
        {"n": 3, "why": "quote_not_in_source"}
    ]
