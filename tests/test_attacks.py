"""The privilege model, attacked as a hostile tenant would (issue: security hardening).

Each test logs in as an ordinary role (a reader, a writer, an admin, or a role with no pgcite grant at all),
tries one attack, and asserts that it fails with the documented SQLSTATE and that nothing changed.
The database is this module's own, with committed data, so several sessions can see it at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from conftest import ALPHA_DOC, connect, drop_database, fails, sqlstate_of, two_tenant_database

ROOT = Path(__file__).resolve().parents[1]
SFX = uuid.uuid4().hex[:6]
R = {k: f"{k}_{SFX}" for k in ("reader", "writer", "admin", "nobody", "bravo")}


@pytest.fixture(scope="module")
def adb(pg):
    yield from two_tenant_database(pg, f"pgcite_attack_{SFX}", R)


def snapshot(pg, db) -> dict:
    """Every row of every rag table, as text, for 'nothing changed' checks."""
    with pg.admin(db) as c:
        tables = [
            r[0]
            for r in c.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'rag'::regnamespace"
                " AND relkind = 'r' ORDER BY 1"
            )
        ]
        return {
            t: c.execute(
                f"SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) FROM rag.{t} AS x"
            ).fetchone()[0]
            for t in tables
        }


# ---------------------------------------------------------------- 1. settings that choose code
def test_a_session_cannot_choose_the_python_that_runs(pg, adb, tmp_path):
    evil = tmp_path / "site-packages" / "pgcite_udfs"
    evil.mkdir(parents=True)
    marker = tmp_path / "pwned"
    (evil / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (evil / "udf.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    os.chmod(tmp_path, 0o755)
    for d in (tmp_path / "site-packages", evil):
        os.chmod(d, 0o755)
    with connect(pg, adb, R["reader"]) as c:
        c.execute(f"SET pgcite.python_path = '{evil.parent}'")
        assert fails(c, "SELECT rag.embed('x')") == "42501"
        assert fails(c, "SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha')") == "42501"
    # ALTER ROLE ... SET (a role may set its own defaults) and connection options are refused the same way
    with pg.admin(adb) as c:
        c.execute(f"ALTER ROLE {R['reader']} SET pgcite.python_path = '{evil.parent}'")
    try:
        with connect(pg, adb, R["reader"]) as c:
            assert fails(c, "SELECT rag.embed('x')") == "42501"
    finally:
        with pg.admin() as a:
            a.execute(f"ALTER ROLE {R['reader']} RESET ALL")
    with connect(pg, adb, R["reader"], options="-c pgcite.min_score=0") as c:
        e = fails(c, "SELECT * FROM rag.ask('What is the capital of France?', 'alpha')")
        assert e == "42501"
    assert not marker.exists()


def test_settings_are_set_by_admins_only_and_code_paths_by_superusers(pg, adb):
    before = snapshot(pg, adb)
    with connect(pg, adb, R["reader"]) as c:
        assert fails(c, "SELECT rag.set_config('min_score', '0')") == "42501"
        assert fails(c, "INSERT INTO rag.config VALUES ('min_score', '0', current_user)") == "42501"
    with connect(pg, adb, R["admin"]) as c:
        assert fails(c, "SELECT rag.set_config('python_path', '/tmp')") == "42501"
        assert fails(c, "SELECT rag.set_config('model', 'x/y')") == "42501"
        assert fails(c, "SELECT rag.set_config('min_score', 'NaN')") == "22023"
        assert fails(c, "SELECT rag.set_config('min_score', '2')") == "22023"
        assert fails(c, "SELECT rag.set_config('no_such', '1')") == "22023"
    assert snapshot(pg, adb) == before
    with connect(pg, adb, R["admin"]) as c:
        assert c.execute("SELECT rag.set_config('min_score', '0.55')").fetchone()[0] == "0.55"
        row = c.execute("SELECT value, source FROM rag.settings WHERE name = 'min_score'").fetchone()
        assert row == ("0.55", "rag.config")
        c.execute("SELECT rag.set_config('min_score', NULL)")
        assert (
            c.execute("SELECT source FROM rag.settings WHERE name = 'min_score'").fetchone()[0] == "default"
        )


# ---------------------------------------------------------------- 2, 3, 5. direct writes
@pytest.mark.parametrize(
    "role,sql",
    [
        (
            "reader",
            "INSERT INTO rag.ask_log (tenant, seq, role_name, asked_at, question, k, options, settings,"
            " query_embedding_supplied, chunk_ids, status, citations, evidence, timings, fingerprint,"
            " row_hash)"
            " VALUES ('alpha', 0, current_user, now() - interval '1 year', 'q', 1, '{}',"
            " '{\"pgcite.python_path\": \"/tmp\"}', false, '{}', 'answered', '[]', '{}', '{}', 'x', '')",
        ),
        (
            "reader",
            "INSERT INTO rag.ask_log (ask_id, tenant, role_name, asked_at, question, k, options, settings,"
            " query_embedding_supplied, chunk_ids, status, citations, evidence, timings, fingerprint)"
            " OVERRIDING SYSTEM VALUE VALUES (999999999, 'alpha', current_user, now(), 'q', 1, '{}', '{}',"
            " false, '{}', 'answered', '[]', '{}', '{}', 'x')",
        ),
        (
            "writer",
            "INSERT INTO rag.document (document_id, tenant, doc_key, version, content_hash, format,"
            " chunk_count) OVERRIDING SYSTEM VALUE VALUES (999999999, 'alpha', 'x', 1, '', 'text', 0)",
        ),
        ("writer", "UPDATE rag.document SET retired_at = now() WHERE tenant = 'alpha'"),
        ("writer", "UPDATE rag.document SET retired_at = NULL, created_at = '2000-01-01'"),
        ("writer", "UPDATE rag.chunk SET retired_at = now() WHERE tenant = 'alpha'"),
        (
            "writer",
            "INSERT INTO rag.chunk (tenant, document_id, doc_key, doc_version, chunk_index, content,"
            " content_hash, token_count, embedding, model, ts_config) SELECT 'alpha', document_id, 'b.md', 1,"
            " 9, 'x', '', 1, array_fill(0.1, ARRAY[384])::real[]::vector, 'other/model', 'english'"
            " FROM rag.document LIMIT 1",
        ),
        ("writer", "INSERT INTO rag.term VALUES ('alpha', 'zzz')"),
        ("writer", "DELETE FROM rag.term"),
        ("admin", "UPDATE rag.tenant SET gate = '{\"min_score\": 0}'"),
        ("admin", "INSERT INTO rag.tenant_member VALUES ('bravo', 'x', now(), 'pg_monitor'::regrole)"),
        ("admin", "UPDATE rag.log_head SET seq = 0"),
        ("nobody", "SELECT * FROM rag.ask('launch code', 'bravo')"),
        ("nobody", "SELECT count(*) FROM rag.chunk"),
    ],
)
def test_tables_are_read_only_to_every_role(pg, adb, role, sql):
    before = snapshot(pg, adb)
    with connect(pg, adb, R[role]) as c:
        assert fails(c, sql) == "42501"
    assert snapshot(pg, adb) == before


def test_internal_definer_functions_refuse_another_caller(pg, adb):
    with connect(pg, adb, R["reader"]) as c:
        # naming another role (one the session cannot SET ROLE to) is refused
        assert (
            fails(c, "SELECT * FROM rag._ask(%s, 'launch code', 'bravo', 5, NULL, '{}')", (R["bravo"],))
            == "42501"
        )
        assert (
            fails(c, "SELECT * FROM rag._ask('postgres', 'launch code', 'bravo', 5, NULL, '{}')") == "42501"
        )
    with connect(pg, adb, R["writer"]) as c:
        assert fails(c, "SELECT rag._delete_document(%s, 'bravo', 'b.md')", (R["bravo"],)) == "42501"
        assert fails(c, "SELECT rag._delete_document(%s, 'bravo', 'b.md')", (R["writer"],)) == "42501"


def test_a_role_without_grants_cannot_block_asks_or_ingests(pg, adb):
    """Advisory locks serialised 0.2.0, and any role could take their keys. Now they block nothing."""
    with connect(pg, adb, R["nobody"]) as n:
        n.execute("SELECT pg_advisory_lock(hashtextextended('rag.ask_log:alpha', 7411))")
        n.execute("SELECT pg_advisory_lock(hashtextextended('alpha' || chr(31) || 'a.md', 7411))")
        with connect(pg, adb, R["writer"]) as w:
            w.execute("SELECT rag.embed('warm up: a backend loads the model on its first embedding')")
            w.execute("SET statement_timeout = '20s'")
            assert w.execute("SELECT status FROM rag.ask('When does alpha vacuum?', 'alpha')").fetchone()[0]
            row = w.execute("SELECT status FROM rag.ingest('alpha', 'a.md', %s)", (ALPHA_DOC,)).fetchone()
            assert row[0] == "unchanged"


# ---------------------------------------------------------------- 4. membership follows the role
def test_membership_follows_the_role_not_its_name(pg, adb):
    quoted = f"Team-A-{SFX}"
    with pg.admin(adb) as c:
        c.execute(f'CREATE ROLE "{quoted}" LOGIN IN ROLE pgcite_reader')
        c.execute(f'CREATE ROLE """{quoted}""" LOGIN IN ROLE pgcite_reader')  # literally "Team-A-.."
    try:
        with connect(pg, adb, R["admin"]) as a:
            a.execute("SELECT rag.grant_tenant('alpha', %s)", (f'"{quoted}"',))
            stored = a.execute(
                "SELECT member_role::text, member_name FROM rag.tenant_member WHERE member_name = %s",
                (quoted,),
            ).fetchone()
            assert stored == (f'"{quoted}"', quoted)
        with connect(pg, adb, quoted) as c:
            assert c.execute("SELECT status FROM rag.ask('When does alpha vacuum?', 'alpha')").fetchone()[0]
        with connect(pg, adb, f'"{quoted}"') as c:
            assert fails(c, "SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha')") == "42501"
        # dropped and re-created under the same name: the new role is not a member
        with pg.admin(adb) as c:
            c.execute(f'DROP ROLE "{quoted}"')
            c.execute(f'CREATE ROLE "{quoted}" LOGIN IN ROLE pgcite_reader')
        with connect(pg, adb, quoted) as c:
            assert fails(c, "SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha')") == "42501"
            assert c.execute("SELECT count(*) FROM rag.chunk").fetchone()[0] == 0
        with connect(pg, adb, R["admin"]) as a:
            assert a.execute("SELECT rag.prune_members()").fetchone()[0] == 1
    finally:
        with pg.admin() as a:
            a.execute(f'DROP ROLE IF EXISTS "{quoted}"')
            a.execute(f'DROP ROLE IF EXISTS """{quoted}"""')


# ---------------------------------------------------------------- 5. writers keep their tenant consistent
def test_writers_store_only_through_functions_with_checked_input(pg, adb):
    zero = [0.0] * 384
    with connect(pg, adb, R["writer"]) as c:
        items = json.dumps([{"content": "zero vector", "embedding": zero}])
        assert fails(c, "SELECT * FROM rag.store_document('alpha', 'z', %s)", (items,)) == "22023"
        # another tenant's document key
        assert fails(c, "SELECT * FROM rag.delete_document('bravo', 'b.md')") == "42501"


def test_sentences_are_reused_only_for_the_same_content(pg, adb):
    """A chunk's text hash is of its title, a blank line and its content: "Delta" + "The ..." and an
    untitled "Delta<blank line>The ..." share it (and their embedding), not their sentence offsets. Copied by
    hash alone, an untitled paragraph stored first made rag.ingest of the titled section fail (22023: a
    sentence out of its chunk), and the other order stored spans shifted by the title."""
    text = "The delta team vacuums at noon. It is fine to do so."
    untitled, titled = f"Delta\n\n{text}\n", f"# Delta\n\n{text}\n"
    spans = (
        "SELECT array_agg(s.start_pos || '-' || s.end_pos ORDER BY s.ord) FROM rag.sentence AS s"
        " JOIN rag.chunk AS c USING (chunk_id)"
        " WHERE c.tenant = 'alpha' AND c.doc_key = %s AND c.retired_at IS NULL"
    )
    with connect(pg, adb, R["writer"]) as c:
        try:
            for first, second in ((untitled, titled), (titled, untitled)):
                for key, body in (("delta-1.md", first), ("delta-2.md", second)):
                    row = c.execute("SELECT status FROM rag.ingest('alpha', %s, %s, 'markdown')", (key, body))
                    assert row.fetchone() == ("inserted",)
                with pg.admin(adb) as a:
                    got = {k: a.execute(spans, (k,)).fetchone()[0] for k in ("delta-1.md", "delta-2.md")}
                want = {untitled: ["0-5", "7-38", "39-59"], titled: ["0-31", "32-52"]}
                assert got == {"delta-1.md": want[first], "delta-2.md": want[second]}
                for key in ("delta-1.md", "delta-2.md"):
                    c.execute("SELECT rag.delete_document('alpha', %s)", (key,))
        finally:
            for key in ("delta-1.md", "delta-2.md"):
                c.execute("SELECT rag.delete_document('alpha', %s)", (key,))


# ---------------------------------------------------------- 6. dump/restore keeps the log; a cut tail shows
def pg_bin(name: str) -> str:
    pg_config = subprocess.run(
        [str(ROOT / "scripts/pg_config.sh")], capture_output=True, text=True
    ).stdout.strip()
    bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip()
    return f"{bindir}/{name}"


def test_dump_and_restore_keep_every_row_byte_identical(pg, adb, tmp_path):
    with connect(pg, adb, R["reader"]) as c:
        for q in ("When does alpha vacuum?", "What is a B-tree index for?", "capital of France?"):
            c.execute("SELECT * FROM rag.ask(%s, 'alpha')", (q,))
    params = psycopg.conninfo.conninfo_to_dict(pg.dsn(adb))
    env = {**os.environ, "PGHOST": str(params["host"]), "PGPORT": str(params["port"]), "PGUSER": "postgres"}
    dump = tmp_path / "a.dump"
    subprocess.run([pg_bin("pg_dump"), "-Fc", "-d", adb, "-f", str(dump)], check=True, env=env)
    target = f"{adb}_restored"
    drop_database(pg, target)
    with pg.admin() as a:
        a.execute(f'CREATE DATABASE "{target}"')
    try:
        subprocess.run(
            [pg_bin("pg_restore"), "-d", target, str(dump)], check=True, env=env, capture_output=True
        )
        assert snapshot(pg, target) == snapshot(pg, adb)
        with connect(pg, target, R["reader"]) as c:
            ok, checked = c.execute("SELECT ok, checked FROM rag.verify_log('alpha')").fetchone()[:2]
            assert ok and checked >= 3
    finally:
        drop_database(pg, target)


def test_removing_the_log_tail_or_all_of_it_is_detected(pg, adb):
    with connect(pg, adb, R["reader"]) as c:
        for q in ("When does alpha vacuum?", "What is a B-tree index for?"):
            c.execute("SELECT * FROM rag.ask(%s, 'alpha')", (q,))
        before = c.execute("SELECT ok, checked FROM rag.verify_log('alpha')").fetchone()
        assert before[0] is True
    with psycopg.connect(pg.dsn(adb)) as a:  # one transaction, rolled back: the deletions never happen
        a.execute("ALTER TABLE rag.ask_log DISABLE TRIGGER ask_log_append_only")
        a.execute(
            "DELETE FROM rag.ask_log WHERE tenant = 'alpha' AND seq = (SELECT max(seq) FROM rag.ask_log"
            " WHERE tenant = 'alpha')"
        )
        row = a.execute("SELECT ok, problem FROM rag.verify_log('alpha')").fetchone()
        assert row[0] is False and "removed" in row[1]
        a.execute("DELETE FROM rag.ask_log WHERE tenant = 'alpha'")
        row = a.execute("SELECT ok, checked, problem FROM rag.verify_log('alpha')").fetchone()
        assert row[0] is False and row[1] == 0 and "removed" in row[2]
        # the next entry does not reuse a deleted seq: the head is outside the log
        a.execute(f"SET LOCAL ROLE {R['reader']}")
        a.execute("SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha')")
        a.execute("RESET ROLE")
        assert (
            a.execute("SELECT min(seq) FROM rag.ask_log WHERE tenant = 'alpha'").fetchone()[0]
            == before[1] + 1
        )
        a.rollback()


# ---------------------------------------------------------------- 7. the gate cannot be bypassed
def test_zero_or_malformed_query_embeddings_are_22023(pg, adb):
    with connect(pg, adb, R["reader"]) as c:
        zero = "[" + ",".join(["0"] * 384) + "]"
        assert (
            fails(
                c, "SELECT * FROM rag.ask('What is the capital of France?', 'alpha', 5, %s::vector)", (zero,)
            )
            == "22023"
        )
        assert fails(c, "SELECT * FROM rag.retrieve('capital', 'alpha', 5, %s::vector)", (zero,)) == "22023"
        # NaN and infinity never reach pgcite: pgvector's own input function refuses them (22000)
        nan = "[" + ",".join(["NaN"] * 384) + "]"
        assert fails(c, "SELECT * FROM rag.ask('capital', 'alpha', 5, %s::vector)", (nan,)) == "22000"


def test_vectors_whose_cosine_is_nan_are_22023_and_store_nothing(pg, adb):
    """Not all zeros, yet no direction for pgvector: it sums squares in single precision, so components of
    1e30 overflow and 1e-40 vanish, and the cosine distance is NaN (sorted after every chunk, a NaN score)."""
    before = snapshot(pg, adb)
    good = [0.05] * 384
    with connect(pg, adb, R["writer"]) as c:
        model = c.execute("SELECT rag.model_name()").fetchone()[0]
        for bad in ([1e30] * 384, [1e-40] * 384, [1e19] * 384):
            content = "The gamma team vacuums at noon."
            for emb, sent in ((bad, good), (good, bad)):
                item = {
                    "content": content,
                    "embedding": emb,
                    "sentences": [{"start": 0, "end": len(content), "embedding": sent}],
                }
                assert (
                    fails(c, "SELECT * FROM rag.store_document('alpha', 'nan', %s)", (json.dumps([item]),))
                    == "22023"
                )
                parsed = {
                    "model": model,
                    "format": "markdown",
                    "chunker_version": 1,
                    "title": None,
                    "empty_sections": 0,
                    "chunks": [item],
                }
                assert (
                    fails(
                        c,
                        "SELECT * FROM rag.store_parsed('alpha', 'nan.md', %s, 'markdown', %s)",
                        (content, json.dumps(parsed)),
                    )
                    == "22023"
                )
    with connect(pg, adb, R["reader"]) as c:
        for bad in ("1e30", "1e-40"):
            vec = "[" + ",".join([bad] * 384) + "]"
            ask = "SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha', 5, %s::vector)"
            assert fails(c, ask, (vec,)) == "22023"
            assert fails(c, "SELECT * FROM rag.retrieve('vacuum', 'alpha', 5, %s::vector)", (vec,)) == "22023"
    assert snapshot(pg, adb) == before


def test_items_that_reuse_stored_sentences_cannot_multiply_them(pg, adb):
    """rag.store_parsed copies the stored embedding and sentences of a chunk text the tenant has into every
    item of that text sent without an embedding: a few bytes of items. One stored chunk of 100 one-character
    sentences and 20 bare copies of its text made 2,020 vectors from 2.5 kB (at scale, 55 kB held 2.1 GB).
    A document may hold one chunk or sentence per 64 bytes of max_document_bytes, counted before copying."""
    content = "x" * 100
    good = [0.05] * 384
    with connect(pg, adb, R["writer"]) as c:
        model = c.execute("SELECT rag.model_name()").fetchone()[0]

        def parsed(chunks):
            return json.dumps(
                {
                    "model": model,
                    "format": "text",
                    "chunker_version": 1,
                    "title": None,
                    "empty_sections": 0,
                    "chunks": chunks,
                }
            )

        seed = [
            {
                "content": content,
                "embedding": good,
                "sentences": [{"start": i, "end": i + 1, "embedding": good} for i in range(100)],
            }
        ]
        sql = "SELECT status FROM rag.store_parsed('alpha', %s, %s, 'text', %s)"
        assert c.execute(sql, ("seed.txt", "seed", parsed(seed))).fetchone() == ("inserted",)
        # rag.ingest copies them too: the chunk text of a markdown section, stored with 70 short sentences
        part = "The omega team vacuums at noon. Every day it does so. And then some more."
        forged = [
            {
                "title": "Omega",
                "content": part,
                "embedding": good,
                "sentences": [{"start": i, "end": i + 1, "embedding": good} for i in range(70)],
            }
        ]
        c.execute("SELECT * FROM rag.store_document('alpha', 'omega-seed', %s)", (json.dumps(forged),))
    with pg.admin(adb) as a:
        a.execute("SELECT rag.set_config('max_document_bytes', '64000')")  # 1,000 chunks and sentences
    try:
        before = snapshot(pg, adb)
        with connect(pg, adb, R["writer"]) as c:
            copies = [{"content": content, "embedding": None} for _ in range(20)]
            assert fails(c, sql, ("copies.txt", "copies", parsed(copies))) == "54000"
            body = f"# Omega\n\n{part}\n\n" * 20  # 20 chunks of that text: 1,440 vectors
            assert (
                fails(c, "SELECT * FROM rag.ingest('alpha', 'omega.md', %s, 'markdown')", (body,)) == "54000"
            )
        assert snapshot(pg, adb) == before
        with connect(pg, adb, R["writer"]) as c:
            # nine copies (909 vectors) are within the limit, and get the stored sentences
            assert c.execute(sql, ("copies.txt", "copies", parsed(copies[:9]))).fetchone() == ("inserted",)
            assert c.execute("SELECT rag.delete_document('alpha', 'copies.txt')").fetchone() == (True,)
    finally:
        with pg.admin(adb) as a:
            a.execute("SELECT rag.set_config('max_document_bytes', NULL)")
        with connect(pg, adb, R["writer"]) as c:
            c.execute("SELECT rag.delete_document('alpha', 'seed.txt')")
            c.execute("SELECT rag.delete_document('alpha', 'omega-seed')")
    with pg.admin(adb) as a:
        n = a.execute(
            "SELECT count(*) FROM rag.sentence AS s JOIN rag.chunk AS c USING (chunk_id)"
            " WHERE c.tenant = 'alpha' AND c.doc_key = 'copies.txt'"
        ).fetchone()[0]
        assert n == 900


def test_chunk_titles_and_anchors_count_against_the_document_limit(pg, adb):
    """max_document_bytes bounded the content of a document's chunks, not their titles, anchors and section
    paths: rag.store_parsed takes those from the client, so any amount of text could be stored beside a few
    bytes of content. They count now (apart from the content), with the document's title, URL and metadata."""
    good = [0.05] * 384
    with pg.admin(adb) as a:
        a.execute("SELECT rag.set_config('max_document_bytes', '64000')")
    try:
        before = snapshot(pg, adb)
        with connect(pg, adb, R["writer"]) as c:
            model = c.execute("SELECT rag.model_name()").fetchone()[0]
            for field in ("title", "anchor", "section_path"):
                chunks = [
                    {"content": f"part {i}", "embedding": good, field: "heading " * 1500} for i in range(10)
                ]
                parsed = {
                    "model": model,
                    "format": "text",
                    "chunker_version": 1,
                    "title": None,
                    "empty_sections": 0,
                    "chunks": chunks,
                }
                sql = "SELECT * FROM rag.store_parsed('alpha', 'titles.txt', 'parts', 'text', %s)"
                assert fails(c, sql, (json.dumps(parsed),)) == "54000", field
            parsed["chunks"] = [{"content": "part", "embedding": good}]
            big = json.dumps({"note": "x" * 70000})
            sql = "SELECT * FROM rag.store_parsed('alpha', 'titles.txt', 'parts', 'text', %s, metadata => %s)"
            assert fails(c, sql, (json.dumps(parsed), big)) == "54000"
        assert snapshot(pg, adb) == before
    finally:
        with pg.admin(adb) as a:
            a.execute("SELECT rag.set_config('max_document_bytes', NULL)")


# ---------------------------------------------------------------- 8. asks never wait on each other
def test_an_open_transaction_holds_up_no_other_ask(pg, adb):
    with connect(pg, adb, R["reader"]) as a, connect(pg, adb, R["writer"]) as b:
        b.execute("SELECT rag.embed('warm up: the first embedding in a backend loads the model')")
        a.autocommit = False
        a.execute("SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha')")  # holds the log head
        b.execute("SET statement_timeout = '5s'")
        t0 = time.monotonic()
        assert b.execute("SELECT ask_id FROM rag.ask('What is a B-tree index for?', 'alpha')").fetchone()[0]
        assert time.monotonic() - t0 < 5
        a.commit()
        v = b.execute("SELECT ok, unsealed FROM rag.verify_log('alpha')").fetchone()
        assert v == (True, 0)


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_concurrent_asks_work_under_every_isolation_level(pg, adb, isolation):
    errors: list[str] = []
    done: list[int] = []

    def worker():
        with connect(pg, adb, R["reader"]) as c:
            c.autocommit = False
            for i in range(6):
                try:
                    c.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
                    c.execute("SELECT ask_id FROM rag.ask(%s, 'alpha')", (f"When does alpha vacuum {i}?",))
                    c.commit()
                    done.append(1)
                except psycopg.Error as e:
                    errors.append(f"{e.sqlstate}: {e}")
                    c.rollback()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(done) == 48
    with connect(pg, adb, R["reader"]) as c:
        ok, _, _, problem, unsealed = c.execute("SELECT * FROM rag.verify_log('alpha')").fetchone()
        assert ok, problem
        assert unsealed == 0  # verify_log (READ COMMITTED) sealed what the other levels left


# ---------------------------------------------------------------- 9. bounded work
def test_chunking_is_for_writers_and_bounded(pg, adb):
    with connect(pg, adb, R["reader"]) as c:
        assert fails(c, "SELECT count(*) FROM rag.chunk_text('some text')") == "42501"
    with pg.admin(adb) as a:
        a.execute("SELECT rag.set_config('max_document_bytes', '1000')")
    try:
        with connect(pg, adb, R["writer"]) as c:
            assert fails(c, "SELECT count(*) FROM rag.chunk_text(repeat('word ', 300))") == "54000"
            assert fails(c, "SELECT * FROM rag.ingest('alpha', 'big.md', repeat('word ', 300))") == "54000"
    finally:
        with pg.admin(adb) as a:
            a.execute("SELECT rag.set_config('max_document_bytes', NULL)")


# ---------------------------------------------------------------- 10. smaller ones
@pytest.mark.parametrize(
    "options,key",
    [
        ('{"max_quotes": "2"}', "max_quotes"),
        ('{"max_quotes": 2.5}', "max_quotes"),
        ('{"passages": 99999999999999999999}', "passages"),
        ('{"quote_margin": "NaN"}', "quote_margin"),
        ('{"rank_penalty": -1}', "rank_penalty"),
        ('{"max_qoutes": 2}', "max_qoutes"),
        ("[1]", "options"),
    ],
)
def test_every_option_is_validated(pg, adb, options, key):
    before = snapshot(pg, adb)
    with connect(pg, adb, R["reader"]) as c:
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha', 5, NULL, %s)", (options,))
        assert sqlstate_of(e) == "22023" and key in e.value.diag.message_primary
    assert snapshot(pg, adb) == before


@pytest.mark.parametrize(
    "options",
    [
        {"k" * 100_000: 1},
        {"max_quotes": "v" * 100_000},
        {"generator": "g" * 100_000},
    ],
    ids=["key", "value", "generator"],
)
def test_an_option_error_quotes_a_bounded_part_of_the_value(pg, adb, options):
    """A megabyte of option key or value came back whole in the message (and in the server log) before 0.9.0:
    the message quotes at most 60 characters of it, marked as cut."""
    with connect(pg, adb, R["reader"]) as c:
        with pytest.raises(psycopg.Error) as e:
            ask = "SELECT * FROM rag.ask('When does alpha vacuum?', 'alpha', 5, NULL, %s)"
            c.execute(ask, (json.dumps(options),))
    message = e.value.diag.message_primary
    assert sqlstate_of(e) == "22023" and len(message) < 200 and "..." in message, message


def test_title_and_url_swapped_between_null_and_a_value_is_a_new_version(pg, adb):
    with connect(pg, adb, R["writer"]) as c:
        body = "# Swap\n\nSome text about swapping titles.\n"
        c.execute("SELECT * FROM rag.ingest('alpha', 'swap.md', %s, 'auto', 'T', NULL)", (body,))
        row = c.execute(
            "SELECT status FROM rag.ingest('alpha', 'swap.md', %s, 'auto', NULL, 'T')", (body,)
        ).fetchone()
        assert row[0] == "updated"
        assert c.execute(
            "SELECT title, source_url FROM rag.document WHERE doc_key = 'swap.md' AND retired_at IS NULL"
        ).fetchone() == ("Swap", "T")


def test_readers_cannot_order_by_embedding_so_explain_counts_nothing(pg, adb):
    """The EXPLAIN side channel of 0.2.0: an ORDER BY embedding (or a tsv match) on rag.chunk as a reader let
    EXPLAIN ANALYZE count other tenants' rows the policy removed. Readers cannot reference those columns."""
    with connect(pg, adb, R["reader"]) as c:
        probe = "[" + ",".join(["0.05"] * 384) + "]"
        assert (
            fails(
                c,
                "EXPLAIN ANALYZE SELECT chunk_id FROM rag.chunk ORDER BY embedding <=> %s::vector LIMIT 5",
                (probe,),
            )
            == "42501"
        )
        assert (
            fails(c, "EXPLAIN ANALYZE SELECT chunk_id FROM rag.chunk WHERE tsv @@ 'pelican'::tsquery")
            == "42501"
        )
        # what a reader can read is its own tenant's text
        assert c.execute("SELECT count(*) FROM rag.chunk WHERE content LIKE '%pelican%'").fetchone()[0] == 0


# ---------------------------------------------------------------- the catalog, checked
def test_catalog_no_tenant_role_can_write_and_tenant_data_has_rls(pg, adb):
    with pg.admin(adb) as c:
        writable = c.execute(
            """
            SELECT r.rolname, c.relname, p.priv
            FROM pg_class c
            CROSS JOIN (VALUES ('pgcite_reader'), ('pgcite_writer'), ('pgcite_admin')) AS r (rolname)
            CROSS JOIN (VALUES ('INSERT'), ('UPDATE'), ('DELETE'), ('TRUNCATE')) AS p (priv)
            WHERE c.relnamespace = 'rag'::regnamespace AND c.relkind IN ('r', 'p', 'S')
              AND (has_table_privilege(r.rolname, c.oid, p.priv)
                   OR (p.priv IN ('INSERT', 'UPDATE') AND c.relkind <> 'S'
                       AND has_any_column_privilege(r.rolname, c.oid, p.priv)))
            """
        ).fetchall()
        assert writable == []
        no_rls = c.execute(
            """
            SELECT c.relname FROM pg_class c
            WHERE c.relnamespace = 'rag'::regnamespace AND c.relkind = 'r' AND NOT c.relrowsecurity
              AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant')
            """
        ).fetchall()
        assert no_rls == []
        # SECURITY DEFINER functions: owned by pgcite_owner (no superuser), search_path pinned, reason given
        definers = c.execute(
            """
            SELECT p.oid::regprocedure::text, pg_get_userbyid(p.proowner), p.proconfig,
                   obj_description(p.oid, 'pg_proc')
            FROM pg_proc p WHERE p.pronamespace = 'rag'::regnamespace AND p.prosecdef
            """
        ).fetchall()
        assert len(definers) > 10
        for name, owner, cfg, comment in definers:
            assert owner == "pgcite_owner", name
            assert any(s.startswith("search_path=pg_catalog") for s in cfg or []), name
            assert "SECURITY DEFINER" in (comment or ""), name
        assert c.execute(
            "SELECT rolsuper, rolcanlogin FROM pg_roles WHERE rolname = 'pgcite_owner'"
        ).fetchone() == (
            False,
            False,
        )
        # no function a tenant role can execute reads a pgcite setting but rag._config_text, which refuses a
        # session's value (rag._params only looks whether there is one, and then calls rag._config_text)
        readers = c.execute(
            r"""
            SELECT p.oid::regprocedure::text FROM pg_proc p
            WHERE p.pronamespace = 'rag'::regnamespace
              AND (has_function_privilege('pgcite_reader', p.oid, 'EXECUTE')
                   OR has_function_privilege('pgcite_writer', p.oid, 'EXECUTE'))
              AND p.prosrc ~ 'current_setting\(.pgcite\.' AND p.proname NOT IN ('_config_text', '_params')
            """
        ).fetchall()
        assert readers == []


# ---------------------------------------------------------------- found by attacking 0.3.0 itself
def test_a_callers_temporary_table_never_runs_as_the_owner(pg, adb):
    """rag.calibrate once kept its rows in a temporary table: an admin's own table of that name, with a
    trigger, ran the admin's code as pgcite_owner. It keeps them in a local value now."""
    before = snapshot(pg, adb)
    with connect(pg, adb, R["admin"]) as c:
        c.autocommit = False
        c.execute(
            "CREATE TEMP TABLE pgcite_calibration (ord int, id text, kind text, answerable bool,"
            " score float8, similarity float8, coverage float8, sentence float8, names float8,"
            " top_anchor text,"
            " expected_in_top_k bool)"
        )
        c.execute(
            "CREATE FUNCTION pg_temp.pwn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " INSERT INTO rag.config VALUES ('python_path', '/tmp/evil', 'x'); RETURN NEW; END $$"
        )
        c.execute(
            "CREATE TRIGGER t BEFORE INSERT ON pg_temp.pgcite_calibration"
            " FOR EACH ROW EXECUTE FUNCTION pg_temp.pwn()"
        )
        c.execute("GRANT ALL ON pg_temp.pgcite_calibration TO pgcite_owner")
        questions = json.dumps(
            [
                {"question": "When does alpha vacuum?", "kind": "answerable"},
                {"question": "What is the weather in Paris?", "kind": "out_of_corpus"},
            ]
        )
        c.execute("SELECT * FROM rag.calibrate('alpha', %s)", (questions,)).fetchall()
        assert c.execute("SELECT count(*) FROM pgcite_calibration").fetchone()[0] == 0
        c.rollback()
    assert snapshot(pg, adb) == before


def test_writers_calling_store_version_directly_get_the_same_checks(pg, adb):
    vec = "(SELECT ('[' || string_agg('0.1', ',') || ']')::vector FROM generate_series(1, 384))"
    before = snapshot(pg, adb)
    with connect(pg, adb, R["writer"]) as c:
        for key, model, empty, chunk in (
            ("", "sentence-transformers/all-MiniLM-L6-v2", 0, "'text'"),
            ("k", "evil/model", 0, "'text'"),
            ("k", "sentence-transformers/all-MiniLM-L6-v2", -5, "'text'"),
        ):
            sql = (
                f"SELECT * FROM rag._store_version(current_user, 'alpha', %s, sha256('x'), 'text', NULL,"
                f" NULL, '{{}}', %s, %s,"
                f" ARRAY[ROW(NULL, NULL, 't', {chunk}, 1, {vec})::rag.chunk_input], NULL)"
            )
            assert fails(c, sql, (key, empty, model)) in ("22004", "22023")
    with pg.admin(adb) as a:
        a.execute("SELECT rag.set_config('max_document_bytes', '1000')")
    try:
        with connect(pg, adb, R["writer"]) as c:
            sql = (
                "SELECT * FROM rag._store_version(current_user, 'alpha', 'big', sha256('x'), 'text', NULL,"
                f" NULL, '{{}}', 0, rag.model_name(), ARRAY[ROW(NULL, NULL, 't', repeat('x', 5000), 1, {vec})"
                "::rag.chunk_input], NULL)"
            )
            assert fails(c, sql) == "54000"
    finally:
        with pg.admin(adb) as a:
            a.execute("SELECT rag.set_config('max_document_bytes', NULL)")
    assert snapshot(pg, adb) == before


def test_embedding_work_is_bounded_and_stops_at_a_timeout(pg, adb):
    with connect(pg, adb, R["reader"]) as c:
        c.execute("SELECT rag.embed('warm up')")
        # readers cannot run the parser or the sentence splitter through internal functions
        for sql in (
            "SELECT rag._parse('# x', 'markdown', 256, 32)",
            "SELECT * FROM rag._sentence_spans('{a}')",
        ):
            assert fails(c, sql) == "42501"
        too_much = ["lorem ipsum dolor sit amet " * 60] * 2000  # 3.2 MB
        c.execute("SET statement_timeout = '2s'")
        t0 = time.monotonic()
        assert fails(c, "SELECT count(*) FROM rag.embed_many(%s)", (too_much[:600],)) == "57014"
        assert time.monotonic() - t0 < 15  # stopped between slices, not after the whole batch
        c.execute("RESET statement_timeout")
    with pg.admin(adb) as a:
        a.execute("SELECT rag.set_config('max_document_bytes', '100000')")
    try:
        with connect(pg, adb, R["reader"]) as c:
            assert fails(c, "SELECT count(*) FROM rag.embed_many(%s)", (too_much,)) == "54000"
    finally:
        with pg.admin(adb) as a:
            a.execute("SELECT rag.set_config('max_document_bytes', NULL)")


def test_planner_statistics_show_no_tenant_data(pg, adb):
    with pg.admin(adb) as a:
        a.execute("ANALYZE rag.chunk, rag.document, rag.term, rag.ask_log, rag.tenant, rag.tenant_member")
    with connect(pg, adb, R["reader"]) as c:
        rows = c.execute(
            "SELECT tablename, attname FROM pg_stats WHERE schemaname = 'rag'"
            " AND (most_common_vals IS NOT NULL OR histogram_bounds IS NOT NULL)"
            " AND attname IN ('tenant', 'content', 'title', 'doc_key', 'term', 'question', 'answer',"
            " 'member_name')"
        ).fetchall()
        assert rows == []


def test_long_parses_stop_at_statement_timeout_and_deep_html_keeps_its_text(pg, adb):
    with connect(pg, adb, R["writer"]) as c:
        c.execute("SELECT count(*) FROM rag.chunk_text('warm up: the tokenizer loads once')")
        deep = (
            "<html><body>" + "<div>" * 1000 + "<p>The deepest paragraph keeps its text.</p>" + "</div>" * 1000
        )
        c.execute("SELECT * FROM rag.ingest('alpha', 'deep.html', %s, 'html')", (deep,))
        content = c.execute(
            "SELECT string_agg(content, ' ') FROM rag.chunk"
            " WHERE doc_key = 'deep.html' AND retired_at IS NULL"
        ).fetchone()[0]
        assert "The deepest paragraph keeps its text." in content
        # deeper than the parser allows: refused with 54000, or parsed whole; never text silently lost
        deeper = "<html><body>" + "<div>" * 5000 + "<p>Deeper still, and kept.</p>" + "</div>" * 5000
        try:
            c.execute("SELECT * FROM rag.ingest('alpha', 'deeper.html', %s, 'html')", (deeper,))
            kept = c.execute(
                "SELECT string_agg(content, ' ') FROM rag.chunk"
                " WHERE doc_key = 'deeper.html' AND retired_at IS NULL"
            ).fetchone()[0]
            assert "Deeper still, and kept." in (kept or "")
        except psycopg.Error as e:
            assert e.sqlstate == "54000"
        c.execute("SET statement_timeout = '1s'")
        t0 = time.monotonic()
        body = ("word " * 50 + "\n\n") * 60000  # 15 MB of text: many seconds of work
        assert fails(c, "SELECT count(*) FROM rag.chunk_text(%s)", (body,)) == "57014"
        assert time.monotonic() - t0 < 10


def test_correct_question_has_the_question_limit_of_rag_ask(pg, adb):
    with connect(pg, adb, R["reader"]) as c:
        assert fails(c, "SELECT rag.correct_question(repeat('vacum ', 1000), 'alpha')") == "54000"
        assert fails(c, "SELECT rag.correct_question('vacum', 'bravo')") == "42501"


# ---------------------------------------------------------------- session settings that change what SQL means
ASK_TYPO = "SELECT * FROM rag.ask('Which index handles range quries?', 'alpha')"


def answered_and_logged(c) -> tuple:
    """What a reader was answered and what the log kept of it (timings aside)."""
    row = c.execute(ASK_TYPO).fetchone()
    logged = c.execute(
        "SELECT status, answer, citations, evidence, fingerprint, settings FROM rag.ask_log"
        " WHERE ask_id = %s",
        (row[0],),
    ).fetchone()
    return row[1:], logged


@pytest.mark.parametrize(
    "setting",
    [
        # floats as text and JSON: the fingerprint and the scores in the evidence
        "extra_float_digits = -15",
        # string literals: the regular expressions of spans, quotes and the gate (was 2201B)
        "standard_conforming_strings = off",
        # pg_trgm's % operator: with 1, no word is corrected ("quries" stays) and the answer changes
        "pg_trgm.similarity_threshold = 1",
    ],
)
def test_session_settings_do_not_change_what_is_answered_or_logged(pg, adb, setting):
    """Any role may SET these; inside rag.ask (which runs as pgcite_owner) they used to change the logged
    fingerprint and scores, the corrected question, or make the ask fail. Now the answer and the log entry are
    the ones of a session with default settings, and the caller's setting is left as it set it."""
    with connect(pg, adb, R["reader"]) as c:
        expected_row, expected_log = answered_and_logged(c)
    assert expected_row[0] == "answered"
    assert expected_row[4]["gate"]["corrected_question"] == "which index handles range queries"
    with connect(pg, adb, R["reader"]) as c:
        name, value = (x.strip() for x in setting.split("="))
        c.execute(f"SET {setting}")
        row, log = answered_and_logged(c)
        assert c.execute("SELECT current_setting(%s)", (name,)).fetchone()[0] == value
        assert c.execute("SELECT ok FROM rag.verify_log('alpha')").fetchone()[0] is True
    assert row == expected_row
    assert log == expected_log


def test_functions_that_run_as_the_caller_read_their_literals_as_written(pg, adb):
    """rag.verify runs as its caller (no SECURITY DEFINER): with a reader's standard_conforming_strings off it
    parsed its own regular expressions as that setting reads backslashes and failed with 2201B. Every public
    function that runs as its caller now pins the setting for its call (rag._apply_grants): the reader's
    verification is the one of a default session, and its own setting is left as it set it."""
    with connect(pg, adb, R["reader"]) as c:
        row = c.execute(ASK_TYPO).fetchone()
        assert row[1] == "answered"
        answer, cited = c.execute(
            "SELECT answer, citations FROM rag.ask_log WHERE ask_id = %s", (row[0],)
        ).fetchone()
        verify = "SELECT * FROM rag.verify(%s, %s::jsonb, %s::bigint[])"
        args = (answer, json.dumps(cited), [x["chunk_id"] for x in cited])
        expected = c.execute(verify, args).fetchone()
        assert expected[2] == "answered" and expected[1]
    with connect(pg, adb, R["reader"]) as c:
        c.execute("SET standard_conforming_strings = off")
        assert c.execute(verify, args).fetchone() == expected
        assert c.execute("SHOW standard_conforming_strings").fetchone()[0] == "off"
    with pg.admin(adb) as c:
        unpinned = c.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc AS p WHERE p.pronamespace = 'rag'::regnamespace"
            " AND p.prokind = 'f' AND NOT p.prosecdef AND left(p.proname, 1) <> '_'"
            " AND NOT coalesce('standard_conforming_strings=on' = ANY (p.proconfig), false)"
        ).fetchall()
    assert unpinned == []


def test_a_large_reply_to_rag_answer_is_refused_before_any_work(pg, adb):
    """rag.answer checks any caller's reply: 800 copies of a cited sentence and 800 copies of its citation
    (100 kB) cost the check sentences x citations (half a minute of a core, gigabytes a few hundred kB
    later). The reply's size, its answer's length and sentence count and its number of citations are limited
    before anything else: the first such reply gets status retry with the limit named, nothing is logged yet,
    and a second ends the context as generator_invalid_output. (statement_timeout only keeps the test
    short.)"""
    quote = "A B-tree index handles equality and range queries on sortable data."
    with connect(pg, adb, R["reader"]) as c:
        c.execute("SET statement_timeout = '10s'")
        before = c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0]
        ctx = c.execute(
            "SELECT context_id FROM rag.context('Which index handles range queries?', 'alpha')"
        ).fetchone()[0]
        reply = {
            "answer": " ".join([f"{quote} [1]"] * 800),
            "citations": [{"n": 1, "quote": quote}] * 800,
            "abstain": False,
        }
        status, reason, evidence = c.execute(
            "SELECT status, reason, evidence FROM rag.answer(%s, %s::jsonb)", (ctx, json.dumps(reply))
        ).fetchone()
        assert (status, reason) == ("retry", "generator_invalid_output")
        assert any("at most 10000" in e for e in evidence["errors"]), evidence["errors"]
        assert c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0] == before
        reply = {"answer": f"{quote} [1]", "citations": [{"n": 1, "quote": quote}] * 51, "abstain": False}
        status, reason, ask_id = c.execute(
            "SELECT status, reason, ask_id FROM rag.answer(%s, %s::jsonb)", (ctx, json.dumps(reply))
        ).fetchone()
        assert (status, reason) == ("abstained", "generator_invalid_output")
        errors = c.execute(
            "SELECT evidence #> '{generation,attempts,1,errors}' FROM rag.ask_log WHERE ask_id = %s",
            (ask_id,),
        ).fetchone()[0]
        assert errors == ["citations has 51 entries; at most 50."]


def test_an_admin_cannot_send_another_databases_api_key(pg, adb):
    """The server's environment is the whole cluster's: PGCITE_TEST_API_KEY set for one database's generators
    could be named by the administrator of any other (the owner of any database, after a trusted CREATE
    EXTENSION) in a generator of its own, pointed at its own URL, and rag.ask sent the key there. Now a
    superuser names per database the variables its generators may use (generator_key_envs, none by default):
    42501 when creating one, and a generator made while it was allowed sends nothing once it is not."""
    url = "http://127.0.0.1:9/v1"  # nothing listens: a request would fail with 'connection refused'
    with connect(pg, adb, R["admin"]) as c:
        before = snapshot(pg, adb)
        steal = "SELECT rag.create_generator('steal', %s, 'm', api_key_env => 'PGCITE_TEST_API_KEY')"
        assert fails(c, steal, (url,)) == "42501"
        assert snapshot(pg, adb) == before
        assert fails(c, "SELECT rag.set_config('generator_key_envs', 'PGCITE_TEST_API_KEY')") == "42501"
    with pg.admin(adb) as a:
        a.execute("SELECT rag.set_config('generator_key_envs', 'PGCITE_TEST_API_KEY')")
        try:
            with connect(pg, adb, R["admin"]) as c:
                c.execute(steal.replace("'steal'", "'keyed'"), (url,))
        finally:
            a.execute("SELECT rag.set_config('generator_key_envs', NULL)")
    try:
        with connect(pg, adb, R["reader"]) as c:
            status, reason, ask_id = c.execute(
                "SELECT status, reason, ask_id FROM rag.ask('When does alpha vacuum?', 'alpha',"
                ' options => \'{"generator": "keyed"}\')'
            ).fetchone()
            assert (status, reason) == ("abstained", "generator_unavailable")
        with pg.admin(adb) as a:
            attempts = a.execute(
                "SELECT evidence #> '{generation,attempts}' FROM rag.ask_log WHERE ask_id = %s", (ask_id,)
            ).fetchone()[0]
        assert len(attempts) == 1
        assert "may not send the key in PGCITE_TEST_API_KEY" in attempts[0]["error"]
    finally:
        with connect(pg, adb, R["admin"]) as c:
            c.execute("SELECT rag.drop_generator('keyed')")
