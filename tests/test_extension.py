"""The extensions install the PostgreSQL way and follow the project's SQL rules."""

from __future__ import annotations

import json
import os
import re
import subprocess
from array import array
from pathlib import Path

import psycopg
import pytest
from catalog import CATALOG
from conftest import create_database, drop_database, sqlstate_of

DB_PYTHON = os.environ.get("PGCITE_DB_VENV", "/opt/pgcite/venv") + "/bin/python"


def test_create_extension_cascade_in_fresh_database(pg, fresh_db):
    with pg.admin(fresh_db) as c:
        c.execute("CREATE EXTENSION pgcite CASCADE")
        c.execute("CREATE EXTENSION pgcite_python CASCADE")
        rows = dict(c.execute("SELECT extname, extversion FROM pg_extension").fetchall())
    assert rows["pgcite"] == "0.9.0" and rows["pgcite_python"] == "0.9.0"
    assert {"vector", "pg_trgm", "fuzzystrmatch", "plpython3u"} <= set(rows)
    major, minor = (int(x) for x in rows["vector"].split(".")[:2])
    assert (major, minor) >= (0, 8)


@pytest.mark.parametrize("old", ["0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0"])
def test_update_from_a_previous_release_equals_a_fresh_install_and_keeps_data(pg, fresh_db, old):
    """ALTER EXTENSION ... UPDATE from a release frozen in extension/released/ gives exactly what a fresh
    install of this version gives, and the data stored under the old release is still there, still answers,
    and its audit log (chained under the old formula) still verifies and goes on."""
    e1 = "[" + ",".join(["1"] + ["0"] * 383) + "]"
    with pg.admin(fresh_db) as c:
        c.execute(f"CREATE EXTENSION pgcite VERSION '{old}' CASCADE")
        c.execute("SELECT rag.create_tenant('old')")
        items = json.dumps(
            [{"content": "Old rows stay citable after upgrades.", "embedding": json.loads(e1)}]
        )
        c.execute("SELECT * FROM rag.store_document('old', 'v.md', %s)", (items,))
        # logged under the old release (lexical quotes: pgcite_python is not there yet)
        c.execute("SELECT status FROM rag.ask('Do old rows stay citable?', 'old', 1, %s::vector)", (e1,))
        # the old release's rag.ingest runs with this release's Python files (installed before the update)
        c.execute(f"CREATE EXTENSION pgcite_python VERSION '{old}' CASCADE")
        md = "# Autovacuum\n\nThe autovacuum daemon removes dead tuples in the background.\n"
        assert (
            c.execute("SELECT status FROM rag.ingest('old', 'doc.md', %s)", (md,)).fetchone()[0] == "inserted"
        )
        if old < "0.3.0":
            # its rag.ask says clearly that the database must be updated (sentences are scored in SQL now)
            with pytest.raises(psycopg.Error) as e:
                c.execute("SELECT status FROM rag.ask('What removes dead tuples?', 'old', 1)")
            assert sqlstate_of(e) == "55000" and "ALTER EXTENSION" in e.value.diag.message_hint
        member = f"old_member_{old.replace('.', '_')}"
        c.execute(f"CREATE ROLE {member}")
        c.execute("SELECT rag.grant_tenant('old', %s)", (member,))
        c.execute("ALTER EXTENSION pgcite UPDATE")
        c.execute("ALTER EXTENSION pgcite_python UPDATE")
        versions = dict(c.execute("SELECT extname, extversion FROM pg_extension").fetchall())
        assert versions["pgcite"] == "0.9.0" and versions["pgcite_python"] == "0.9.0"
        # the membership was carried over by role
        assert c.execute("SELECT member_role::text, member_name FROM rag.tenant_member").fetchone() == (
            member,
            member,
        )
        c.execute(f"DROP ROLE {member}")
        # the title stored under the old release has its trigrams (the title leg's bound; migration 017)
        assert c.execute(
            "SELECT count(*), count(*) FILTER (WHERE trgm = show_trgm(stripped)) FROM rag.tenant_title"
        ).fetchone() == (1, 1)
        upgraded = [r[0] for r in c.execute(CATALOG).fetchall()]
        status, citations = c.execute(
            "SELECT status, citations FROM rag.ask('What removes dead tuples?', 'old', 1)"
        ).fetchone()
        assert status == "answered" and citations[0]["quote"].startswith("The autovacuum daemon removes")
        assert c.execute("SELECT ok, checked, unsealed FROM rag.verify_log('old')").fetchone() == (True, 2, 0)
        # chunks stored before 0.3.0 get their sentences once (until then rag.ask embeds them on every call)
        assert c.execute("SELECT rag.embed_sentences('old')").fetchone()[0] >= (2 if old < "0.3.0" else 0)
        assert c.execute("SELECT rag.embed_sentences('old')").fetchone()[0] == 0
        # the same body after the upgrade: re-chunked when the chunker's version or the hash changed
        again = c.execute("SELECT status FROM rag.ingest('old', 'doc.md', %s)", (md,)).fetchone()[0]
        assert again == ("updated" if old < "0.3.0" else "unchanged")
    fresh = f"{fresh_db}_new"
    create_database(pg, fresh)
    try:
        with pg.admin(fresh) as c:
            installed = [r[0] for r in c.execute(CATALOG).fetchall()]
    finally:
        drop_database(pg, fresh)
    assert any(x.startswith("function rag.calibrate(") for x in installed)
    assert upgraded == installed


def test_core_works_without_plpython(pg, fresh_db):
    """Managed PostgreSQL without plpython3u: store and retrieve with caller-supplied embeddings."""
    with pg.admin(fresh_db) as c:
        c.execute("CREATE EXTENSION pgcite CASCADE")
        assert c.execute("SELECT count(*) FROM pg_extension WHERE extname = 'plpython3u'").fetchone()[0] == 0
        c.execute("SELECT rag.create_tenant('m')")
        e1 = [1.0] + [0.0] * 383
        e2 = [0.0, 1.0] + [0.0] * 382
        items = [
            {"content": "Autovacuum removes dead tuples in the background.", "embedding": e1, "title": "A"},
            {"content": "A B-tree index handles equality and range queries.", "embedding": e2, "title": "B"},
        ]
        row = c.execute("SELECT * FROM rag.store_document('m', 'doc', %s)", (json.dumps(items),)).fetchone()
        assert row[2] == "inserted" and row[3] == 2
        q = "[" + ",".join(str(x) for x in e2) + "]"
        hits = c.execute(
            "SELECT rank, title FROM rag.retrieve('index range queries', 'm', 2, %s::vector)", (q,)
        )
        assert hits.fetchall()[0] == (1, "B")
        # ask without PL/Python: quotes are chosen lexically and verified like any other
        status, citations, evidence = c.execute(
            "SELECT status, citations, evidence FROM rag.ask(%s, 'm', 2, %s::vector)",
            ("Which index handles range queries?", q),
        ).fetchone()
        assert status == "answered" and evidence["sentence_scoring"] == "lexical"
        assert citations[0]["quote"] == "A B-tree index handles equality and range queries."
        assert citations[0]["verified"] is True
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.retrieve('index range queries', 'm', 2)")
        assert sqlstate_of(e) == "55000"
        assert "pgcite_python" in e.value.diag.message_hint


def f32(values):
    return array("f", values).tolist()


def test_in_database_embedding_equals_plain_python(conn):
    texts = [
        "How do I prevent transaction ID wraparound failures?",
        "GIN indexes are inverted indexes.",
        "é ü ß",
    ]
    rows = conn.execute(
        "SELECT ord, embedding::text FROM rag.embed_many(%s) ORDER BY ord", (texts,)
    ).fetchall()
    db = [json.loads(v) for _, v in rows]
    single = json.loads(conn.execute("SELECT rag.embed(%s)::text", (texts[0],)).fetchone()[0])
    # the backend's code (pgcite_udfs.embed: the ONNX export, or sentence-transformers without one) in plain
    # Python gives the same bits; sentence-transformers itself agrees to cosine >= 0.9999
    code = (
        "import json, sys\n"
        "import numpy as np\n"
        "from pgcite_udfs import embed\n"
        "m = embed.load_model({}, threads=1)  # as in the backend (pgcite.torch_threads = 1)\n"
        "texts = json.loads(sys.argv[1])\n"
        "v = embed.encode(m, texts).tolist() + embed.encode(m, texts[:1]).tolist()\n"
        "ref = embed.load_torch(threads=1).encode(texts, convert_to_numpy=True, show_progress_bar=False)\n"
        "cos = np.sum(np.asarray(v[:3], dtype=np.float32) * ref, axis=1).tolist()\n"
        "print(json.dumps({'vectors': v, 'backend': embed.backend(m), 'cos': cos}))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [DB_PYTHON, "-c", code, json.dumps(texts)], capture_output=True, text=True, env=env, check=True
    )
    out = json.loads(run.stdout.strip().splitlines()[-1])
    # float32 values on both sides (pgvector prints the shortest decimal that round-trips to float32)
    plain = [f32(v) for v in out["vectors"]]
    db = [f32(v) for v in db]
    single = f32(single)
    assert len(db[0]) == 384
    assert out["backend"] == "onnx"  # make setup exports the model; the backend then never imports torch
    assert db == plain[:3]  # bit-identical float32 values, batch of three
    assert single == plain[3]  # one text alone
    assert min(out["cos"]) >= 0.9999, out["cos"]


def test_missing_venv_is_a_clear_error(pg, db):
    with psycopg.connect(pg.dsn(db)) as c:  # a new backend: nothing imported yet
        c.execute("SELECT rag.set_config('python_path', '/nonexistent/venv')")  # a superuser's setting
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT rag.embed('x')")
        assert sqlstate_of(e) == "PC001"
        assert "make setup" in e.value.diag.message_hint
        c.rollback()
        # the backend survives and answers
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_every_function_documented_and_search_path_pinned(conn):
    rows = conn.execute(
        """
        SELECT p.oid::regprocedure::text, obj_description(p.oid, 'pg_proc'), p.proconfig
        FROM pg_proc p WHERE p.pronamespace = 'rag'::regnamespace
        """
    ).fetchall()
    assert len(rows) > 30
    undocumented = [name for name, comment, _ in rows if not comment and not name.startswith("rag._")]
    assert undocumented == []
    unpinned = [name for name, _, cfg in rows if not any(s.startswith("search_path=") for s in (cfg or []))]
    assert unpinned == []


def test_every_public_function_is_in_the_sql_reference(conn):
    """Every public function a user can call (granted to PUBLIC or to a tenant role; not the internal rag._*)
    has a COMMENT ON and an entry in docs/sql.md."""
    rows = conn.execute(
        """
        SELECT DISTINCT p.proname, obj_description(p.oid, 'pg_proc') IS NOT NULL FROM pg_proc p
        WHERE p.pronamespace = 'rag'::regnamespace AND p.prorettype <> 'trigger'::regtype
          AND p.proname NOT LIKE '\\_%%'
          AND (has_function_privilege('public', p.oid, 'EXECUTE')
               OR has_function_privilege('pgcite_reader', p.oid, 'EXECUTE')
               OR has_function_privilege('pgcite_writer', p.oid, 'EXECUTE')
               OR has_function_privilege('pgcite_admin', p.oid, 'EXECUTE'))
        """
    ).fetchall()
    assert len(rows) > 20
    reference = (Path(__file__).parent.parent / "docs" / "sql.md").read_text()
    missing = [name for name, _ in rows if not re.search(rf"\brag\.{name}\b", reference)]
    assert missing == []
    assert [name for name, commented in rows if not commented] == []


def test_user_tables_have_rls_and_are_dumped(conn):
    rows = conn.execute(
        """
        SELECT c.relname, c.relrowsecurity, c.oid = ANY (e.extconfig)
        FROM pg_class c, pg_extension e
        WHERE c.relnamespace = 'rag'::regnamespace AND c.relkind = 'r' AND e.extname = 'pgcite'
        """
    ).fetchall()
    assert {r[0] for r in rows} >= {"tenant", "tenant_member", "document", "chunk", "term", "ask_log"}
    # derived from rag.chunk (and rag.word from rag.term) by their triggers, which refill them when a restore
    # COPYs the chunks and terms: not dumped
    derived = {"tenant_stat", "tenant_lexeme", "tenant_title", "word", "chunk_tsv", "tenant_ann"}
    assert all(rls and (dumped or name in derived) for name, rls, dumped in rows), rows


def test_internal_functions_not_executable_by_public(conn):
    rows = conn.execute(
        """
        SELECT p.oid::regprocedure::text FROM pg_proc p
        WHERE p.pronamespace = 'rag'::regnamespace AND p.proname LIKE '\\_%%'
          AND p.prorettype <> 'trigger'::regtype AND has_function_privilege('public', p.oid, 'EXECUTE')
        """
    ).fetchall()
    assert rows == []


def test_pg_dump_keeps_user_data(pg, db, tmp_path):
    """pg_extension_config_dump: a dump restored into a new database has the corpus and can retrieve."""
    bindir = subprocess.run(["scripts/pg_config.sh"], capture_output=True, text=True).stdout.strip()
    bindir = subprocess.run([bindir, "--bindir"], capture_output=True, text=True).stdout.strip()
    dump = tmp_path / "dump.sql"
    params = psycopg.conninfo.conninfo_to_dict(pg.dsn(db))
    env = {**os.environ, "PGHOST": str(params["host"]), "PGPORT": str(params["port"]), "PGUSER": "postgres"}
    subprocess.run([f"{bindir}/pg_dump", "-d", db, "-f", str(dump)], check=True, env=env)
    target = "pgcite_restore"
    drop_database(pg, target)
    with pg.admin() as a:
        a.execute(f'CREATE DATABASE "{target}"')
    try:
        subprocess.run(
            [f"{bindir}/psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", target, "-f", str(dump)],
            check=True,
            env=env,
            capture_output=True,
        )
        with pg.admin(db) as a, pg.admin(target) as b:
            q = "SELECT count(*), sum(length(content)), max(chunk_id) FROM rag.chunk"
            assert a.execute(q).fetchone() == b.execute(q).fetchone()
            assert b.execute("SELECT count(*) FROM rag.chunk WHERE tsv IS NULL").fetchone()[0] == 0
            # identity continues after the restored rows
            nxt = b.execute("SELECT nextval(pg_get_serial_sequence('rag.chunk', 'chunk_id'))").fetchone()[0]
            assert nxt > a.execute("SELECT max(chunk_id) FROM rag.chunk").fetchone()[0]
            # the retrieval statistics (not dumped) are counted again from the restored chunks
            for t in ("rag.tenant_stat", "rag.tenant_lexeme", "rag.tenant_title"):
                s = f"SELECT * FROM {t} WHERE live_chunks <> 0 ORDER BY 1, 2"
                assert a.execute(s).fetchall() == b.execute(s).fetchall(), t
            s = "SELECT word FROM rag.word ORDER BY 1"
            assert a.execute(s).fetchall() == b.execute(s).fetchall() != []
    finally:
        drop_database(pg, target)


def test_extension_scripts_are_idempotent_to_reinstall(pg, fresh_db):
    drop_database(pg, fresh_db)
    create_database(pg, fresh_db)  # same helper the session fixture uses
    with pg.admin(fresh_db) as c:
        c.execute("DROP EXTENSION pgcite_python")
        c.execute("DROP EXTENSION pgcite")
        c.execute("CREATE EXTENSION pgcite")  # roles already exist: no error
        c.execute("CREATE EXTENSION pgcite_python")
        assert c.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'pgcite_%'").fetchone()[0] == 4
