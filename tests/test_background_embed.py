"""The question embedded on the backend's worker thread (pgcite_udfs/background.py) while retrieval's
full-text and title legs run: the same vectors and answers as embedding it first, only the text begun is
answered, and the backend's signals (cancel, statement_timeout, terminate) keep working with the worker
in it."""

from __future__ import annotations

import json

import psycopg
import pytest
from conftest import connect, sqlstate_of, tenant_reader

WRAP_Q = "How do I prevent transaction ID wraparound failures?"
TYPO_Q = "how does vacum freeze work"
QUESTIONS = [WRAP_Q, TYPO_Q, "What is a BRIN index?", "Which index types support multicolumn indexes?"]


@pytest.fixture(scope="module", autouse=True)
def always(pg, db):
    """background_embedding 2: the worker whatever the machine's load (1, the default, leaves it out while
    every core is busy, as it may be while the tests run)."""
    with pg.admin(db) as a:
        a.execute("SELECT rag.set_config('background_embedding', '2')")
    yield
    with pg.admin(db) as a:
        a.execute("SELECT rag.set_config('background_embedding', NULL)")


@pytest.fixture(scope="module")
def reader(pg, db):
    yield from tenant_reader(pg, db, "tiny", "bg_reader")


def ask(conn, question, qemb=None):
    row = conn.execute(
        "SELECT ask_id, status, answer, citations, evidence FROM rag.ask(%s, 'tiny', 5, %s::vector)",
        (question, qemb),
    ).fetchone()
    return dict(zip(["ask_id", "status", "answer", "citations", "evidence"], row, strict=True))


def notices(conn, sql) -> list[str]:
    """The NOTICEs a superuser's DO block (plpython3u: the backend's own GD) raised."""
    got: list[str] = []
    conn.add_notice_handler(lambda d: got.append(d.message_primary))
    conn.execute(sql)
    return got


JOBS = """DO $$
bg = GD.get("background")
plpy.notice("none" if bg is None else "%d %s" % (bg.jobs, bg._latest.text))
$$ LANGUAGE plpython3u"""


def test_ask_embeds_in_the_background_and_logs_the_vector_it_used(pg, db, reader):
    """Each question is begun on the worker (the typo question twice: its corrected form is what is embedded);
    the answer equals the one for the vector passed in, and the log holds that same vector."""
    with connect(pg, db, reader) as r, pg.admin(db) as a:
        for question in QUESTIONS:
            embedded = a.execute(
                "SELECT rag._embedding_text(%s, rag._correct_question('tiny', %s, rag._params()))",
                (question, question),
            ).fetchone()[0]
            if question == TYPO_Q:
                assert embedded == "how does vacuum freeze work"  # its corrected form is what is embedded
            qemb = r.execute("SELECT rag.embed(%s)::text", (embedded,)).fetchone()[0]
            passed = ask(r, question, qemb)
            background = ask(r, question)
            assert background["status"] == passed["status"]
            assert background["answer"] == passed["answer"]
            assert background["citations"] == passed["citations"]
            assert background["evidence"]["fingerprint"] == passed["evidence"]["fingerprint"]
            logged = a.execute(
                "SELECT query_embedding::text, query_embedding_supplied FROM rag.ask_log WHERE ask_id = %s",
                (background["ask_id"],),
            ).fetchone()
            assert logged == (qemb, False)
    # the worker did the work: one job per question, two for the typo one (a superuser's connection, whose
    # backend asks as the reader through SET ROLE, reads the backend's GD)
    with pg.admin(db) as a:
        a.execute(f"SET ROLE {reader}")
        ask(a, WRAP_Q)
        ask(a, TYPO_Q)
        a.execute("RESET ROLE")
        assert notices(a, JOBS) == ["3 how does vacuum freeze work"]


def test_retrieve_explain_and_context_use_the_background_vector_too(pg, db, reader):
    with connect(pg, db, reader) as r:
        qemb = r.execute("SELECT rag.embed(%s)::text", (WRAP_Q,)).fetchone()[0]
        for sql in (
            "SELECT chunk_id, distance, fused_score FROM rag.retrieve(%s, 'tiny', 8, %s::vector)",
            "SELECT chunk_id, vec_rank, distance, fused_rank FROM rag.explain(%s, 'tiny', 5, %s::vector)",
        ):
            assert r.execute(sql, (WRAP_Q, None)).fetchall() == r.execute(sql, (WRAP_Q, qemb)).fetchall()
        ctx = r.execute("SELECT context_id, status FROM rag.context(%s, 'tiny')", (WRAP_Q,)).fetchone()
        assert ctx[1] == "ready"
    with pg.admin(db) as a:
        logged = a.execute(
            "SELECT query_embedding::text FROM rag.context WHERE context_id = %s", (ctx[0],)
        ).fetchone()[0]
        assert logged == qemb


def test_a_job_of_another_text_or_of_an_aborted_call_is_never_used(pg, db, reader):
    """The worker's latest job answers only for its own text: a job begun for another question, or left by a
    call that failed after beginning it, changes no later answer."""
    with pg.admin(db) as a:
        qemb = a.execute("SELECT rag.embed(%s)::text", (WRAP_Q,)).fetchone()[0]
        other = a.execute("SELECT rag.embed('What is a BRIN index?')::text").fetchone()[0]
        # a job for another text, then the vector of WRAP_Q asked for: WRAP_Q's, not the job's
        a.execute("SELECT rag._embed_begin('What is a BRIN index?')")
        assert a.execute("SELECT rag._embed_end(%s)::text", (WRAP_Q,)).fetchone()[0] == qemb
        # the job stays the latest: its own text still gets its vector from it
        assert a.execute("SELECT rag._embed_end('What is a BRIN index?')::text").fetchone()[0] == other
        # a call that fails after the job began (a statement_timeout in the middle of an ask)
        a.execute("SET ROLE " + reader)
        a.execute("SET statement_timeout = '1ms'")
        with pytest.raises(psycopg.errors.QueryCanceled):
            for _ in range(50):
                ask(a, "What is a BRIN index?")
        a.execute("RESET statement_timeout")
        assert ask(a, WRAP_Q)["evidence"]["fingerprint"] == ask(a, WRAP_Q, qemb)["evidence"]["fingerprint"]
        a.execute("RESET ROLE")
        last = a.execute(
            "SELECT query_embedding::text FROM rag.ask_log ORDER BY ask_id DESC LIMIT 2"
        ).fetchall()
        assert last == [(qemb,), (qemb,)]


def test_tenant_roles_cannot_reach_the_worker(pg, db, reader):
    with connect(pg, db, reader) as r:
        for sql in ("SELECT rag._embed_begin('x')", "SELECT rag._embed_end('x')"):
            with pytest.raises(psycopg.Error) as e:
                r.execute(sql)
            assert sqlstate_of(e) == "42501"


SIGNALS = """DO $$
import json, signal, threading
def blocked(tid):
    for line in open("/proc/self/task/%d/status" % tid):
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
worker = GD["background"]._thread
mask = lambda tid: [s.name for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGUSR1,
    signal.SIGQUIT) if blocked(tid) & (1 << (s - 1))]
plpy.notice(json.dumps([worker.is_alive(), mask(worker.native_id), mask(threading.main_thread().native_id)]))
$$ LANGUAGE plpython3u"""


def test_the_backend_still_handles_its_signals_with_the_worker_in_it(pg, db, reader):
    """The worker blocks every signal, so PostgreSQL's handlers run on the backend's own thread: a
    statement_timeout, a cancel and a terminate reach a backend whose worker exists."""
    with pg.admin(db) as a:
        a.execute(f"SET ROLE {reader}")
        ask(a, WRAP_Q)
        a.execute("RESET ROLE")
        (line,) = notices(a, SIGNALS)
        alive, worker, backend = json.loads(line)
        assert alive is True
        assert worker == ["SIGINT", "SIGTERM", "SIGALRM", "SIGUSR1", "SIGQUIT"]
        assert backend == []
        a.execute("SET statement_timeout = '200ms'")
        with pytest.raises(psycopg.errors.QueryCanceled):
            a.execute("SELECT pg_sleep(5)")
        a.execute("RESET statement_timeout")
        pid = a.execute("SELECT pg_backend_pid()").fetchone()[0]
        with pg.admin(db) as other:
            assert other.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()[0] is True
        with pytest.raises(psycopg.OperationalError):
            a.execute("SELECT 1")


def test_the_setting_background_embedding_0_embeds_before_retrieval(pg, db, reader):
    """An admin can turn the worker off (read when a backend first embeds a question): the same answer and the
    same logged vector, and no job."""
    with pg.admin(db) as a:
        qemb = a.execute("SELECT rag.embed(%s)::text", (WRAP_Q,)).fetchone()[0]
        a.execute("SELECT rag.set_config('background_embedding', '0')")
    try:
        with pg.admin(db) as a:
            a.execute(f"SET ROLE {reader}")
            off = ask(a, WRAP_Q)
            a.execute("RESET ROLE")
            assert notices(a, JOBS) == ["none"]
            logged = a.execute(
                "SELECT query_embedding::text FROM rag.ask_log WHERE ask_id = %s", (off["ask_id"],)
            ).fetchone()[0]
            assert logged == qemb
            assert off["evidence"]["fingerprint"] == ask(a, WRAP_Q, qemb)["evidence"]["fingerprint"]
    finally:
        with pg.admin(db) as a:
            a.execute("SELECT rag.set_config('background_embedding', '2')")
    with pg.admin(db) as a:
        for bad in ("3", "-1"):
            with pytest.raises(psycopg.Error) as e:
                a.execute("SELECT rag.set_config('background_embedding', %s)", (bad,))
            assert sqlstate_of(e) == "22023"
