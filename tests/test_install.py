"""pgcite where users' PostgreSQL runs: the trusted core extension, and `pgcite install` / `pgcite uninstall`
as the owner of a database set up like a managed cloud's (conftest.managed_db): no superuser, no PL/Python."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest
from catalog import catalog
from conftest import ROOT, Managed, create_database, create_managed, drop_database, drop_managed, sqlstate_of

from pgcite import install as inst
from pgcite.cli import main

E1 = [1.0] + [0.0] * 383
E2 = [0.0, 1.0] + [0.0] * 382


def vec(v: list[float]) -> str:
    return "[" + ",".join(str(x) for x in v) + "]"


ITEMS = json.dumps(
    [
        {"content": "Autovacuum removes dead tuples in the background.", "embedding": E1, "title": "A"},
        {"content": "A B-tree index handles equality and range queries.", "embedding": E2, "title": "B"},
    ]
)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def store_and_ask(dsn: str, tenant: str = "m") -> None:
    """The core without PL/Python: a document with the client's embeddings, a question with its embedding."""
    with psycopg.connect(dsn, autocommit=True) as c:
        row = c.execute(
            "SELECT status, chunks FROM rag.store_document(%s, 'doc', %s)", (tenant, ITEMS)
        ).fetchone()
        assert row == ("inserted", 2)
    ask(dsn, tenant)


def ask(dsn: str, tenant: str = "m") -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        status, citations = c.execute(
            "SELECT status, citations FROM rag.ask(%s, %s, 2, %s::public.vector)",
            ("Which index handles range queries?", tenant, vec(E2)),
        ).fetchone()
        assert status == "answered"
        assert citations[0]["quote"] == "A B-tree index handles equality and range queries."
        assert citations[0]["verified"] is True


def add_reader(m: Managed, tenant: str = "m", by_owner: bool = True) -> str:
    """A login role that reads the tenant: created and given pgcite_reader by the owner (CREATEROLE) or by the
    superuser, made a member of the tenant by the owner (a pgcite administrator of its database)."""
    role, password = f"{m.owner}_reader", "reader-pw"
    dsn_creator = m.dsn if by_owner else m.pg.dsn(m.name)
    with psycopg.connect(dsn_creator, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        c.execute(f"GRANT pgcite_reader TO {role}")
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, role))
    return m.dsn_as(role, password)


def local_snapshot(conn: psycopg.Connection) -> dict:
    """Everything of this database that an install could change (object counts per catalog, schemas,
    dependencies, shared dependencies of this database) plus pgcite's roles and their memberships."""
    q = """
    SELECT json_build_object(
      'class', (SELECT count(*) FROM pg_class), 'proc', (SELECT count(*) FROM pg_proc),
      'type', (SELECT count(*) FROM pg_type), 'operator', (SELECT count(*) FROM pg_operator),
      'depend', (SELECT count(*) FROM pg_depend), 'policy', (SELECT count(*) FROM pg_policy),
      'schemas', (SELECT array_agg(nspname ORDER BY nspname) FROM pg_namespace),
      'shdepend', (SELECT count(*) FROM pg_shdepend
                   WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())),
      'extensions', (SELECT array_agg(extname || ' ' || extversion ORDER BY extname) FROM pg_extension))
    """
    local = conn.execute(q).fetchone()[0]
    local["roles"] = conn.execute(
        """SELECT coalesce(array_agg(r.rolname || ':' || coalesce(m.roleid::regrole::text, '')
                                  ORDER BY r.rolname || ':' || coalesce(m.roleid::regrole::text, '')),
                    '{}')
           FROM pg_roles AS r LEFT JOIN pg_auth_members AS m ON m.member = r.oid
           WHERE r.rolname LIKE 'pgcite\\_%' OR m.roleid::regrole::text LIKE 'pgcite\\_%'"""
    ).fetchone()[0]
    return local


def superuser_name(pg) -> str:
    with pg.admin() as a:
        return a.execute("SELECT current_user").fetchone()[0]


def extension_catalog(pg, name: str) -> list[str]:
    """The catalog of CREATE EXTENSION pgcite (by the superuser) in a new database."""
    create_database(pg, name, python=False)
    try:
        with pg.admin(name) as c:
            return catalog(c, installer=superuser_name(pg))
    finally:
        drop_database(pg, name)


# ---------------------------------------------------------------------- pgcite install
def test_install_as_managed_owner_equals_create_extension(pg, managed_db):
    """(a) As the owner of a managed database: the schema `pgcite install` makes is the extension's, object
    for object (functions by text, ACLs, comments, columns, policies, triggers); and it works for the owner
    and for a reader role."""
    m = managed_db
    rc, out, err = cli("install", "--dsn", m.dsn)
    assert rc == 0, err
    assert out.startswith("installed pgcite 0.9.0")
    with psycopg.connect(m.dsn) as c:
        installed = catalog(c, installer=m.owner)
        # the owner acted as pgcite_owner while installing, and no longer is
        assert c.execute("SELECT pg_has_role('pgcite_owner', 'MEMBER')").fetchone()[0] is False
        assert c.execute("SELECT count(*) FROM pg_extension WHERE extname LIKE 'pgcite%'").fetchone()[0] == 0
        owners = dict(
            c.execute(
                "SELECT relname, relowner::regrole::text FROM pg_class"
                " WHERE relnamespace = 'rag'::regnamespace AND relkind = 'r'"
            ).fetchall()
        )
        applied = [r[0] for r in c.execute("SELECT name FROM rag.install_migration ORDER BY name")]
    assert applied == sorted(p.name for p in (ROOT / "migrations").glob("*.sql"))
    assert {o for t, o in owners.items() if not t.startswith("install_")} == {"pgcite_owner"}
    assert installed == extension_catalog(pg, m.name + "_ext")
    assert len(installed) > 300

    # the owner administers (the owner of the database is a pgcite administrator there), stores and asks
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute("SELECT rag.create_tenant('m')")
        assert c.execute("SELECT rag.set_config('min_score', '0.4')").fetchone()[0] == "0.4"
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT rag.set_config('python_path', '/tmp/x')")
        assert sqlstate_of(e) == "42501"
        # no PL/Python here, and the owner cannot add it
        with pytest.raises(psycopg.Error) as e:
            c.execute("CREATE EXTENSION plpython3u")
        assert sqlstate_of(e) == "42501"
    store_and_ask(m.dsn)
    reader = add_reader(m)
    ask(reader)
    with psycopg.connect(reader, autocommit=True) as c:
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM rag.store_document('m', 'x', %s)", (ITEMS,))
        assert sqlstate_of(e) == "42501"
        # views read with pgcite_owner's rights (they used to read with the installer's, which has none on
        # rag.generator: rag.generators failed with 42501 for everyone)
        c.execute("SELECT * FROM rag.generators")
        assert c.execute("SELECT value FROM rag.settings WHERE name = 'min_score'").fetchone()[0] == "0.4"
        assert c.execute(
            "SELECT array_agg(DISTINCT relowner::regrole::text) FROM pg_class"
            " WHERE relnamespace = 'rag'::regnamespace AND relkind = 'v'"
        ).fetchone()[0] == ["pgcite_owner"]


def test_release_then_upgrade_equals_fresh_install_and_keeps_data(pg, managed_db):
    """(b) `pgcite install --version 0.3.0` installs the frozen release; `pgcite install` then applies only
    what is new (006) and re-runs the idempotent files: the result is a fresh install, with the data, answers
    and audit log of 0.3.0 intact."""
    m = managed_db
    rc, out, err = cli("install", "--dsn", m.dsn, "--version", "0.3.0")
    assert rc == 0, err
    assert out.startswith("installed pgcite 0.3.0")
    assert cli("install", "--dsn", m.dsn, "--version", "0.3.0")[:2] == (
        0,
        "pgcite 0.3.0 already installed; nothing to do\n",
    )
    with psycopg.connect(m.dsn) as c:
        assert [r[0] for r in c.execute("SELECT name FROM rag.install_migration ORDER BY 1")] == [
            f"00{i}-{n}.sql"
            for i, n in enumerate(["prerequisites", "schema", "result-types", "privileges", "sentences"])
        ] + ["005-generators.sql"]
    # 0.3.0 has no database-owner administrators: the superuser sets up the tenant, as it would have then
    with m.admin() as c:
        c.execute("SELECT rag.create_tenant('m')")
        c.execute("SELECT * FROM rag.store_document('m', 'doc', %s)", (ITEMS,))
    ask(m.pg.dsn(m.name))

    rc, out, err = cli("install", "--dsn", m.dsn)
    assert rc == 0, err
    assert out.splitlines() == [
        "upgraded pgcite 0.3.0 -> 0.9.0",
        "migrations applied: 006-trusted.sql, 007-retrieval-stats.sql, 008-words.sql, "
        "009-explain-query-embedding.sql, 010-chunk-tsv.sql, 012-ask-stages.sql, 013-quote-bonus.sql, "
        "014-ann-tuning.sql, 015-candidates-question.sql, 016-choose-quotes-features.sql, "
        "017-title-trigrams.sql, 018-chunk-tsv-tenant.sql, 019-chunk-tsv-newest.sql, 020-title-order.sql",
    ]
    with psycopg.connect(m.dsn) as c:
        upgraded = catalog(c, installer=m.owner)
        versions = [r[0] for r in c.execute("SELECT version FROM rag.install_version ORDER BY id")]
        assert versions == ["0.3.0", "0.9.0"]
    ask(m.dsn)  # the owner, an administrator now, asks the data stored under 0.3.0
    with psycopg.connect(m.dsn) as c:
        assert c.execute("SELECT ok, checked FROM rag.verify_log('m')").fetchone() == (True, 2)
        assert c.execute("SELECT count(*) FROM rag.chunk").fetchone()[0] == 2

    fresh = create_managed(pg)
    try:
        assert cli("install", "--dsn", fresh.dsn)[0] == 0
        with psycopg.connect(fresh.dsn) as c:
            assert upgraded == catalog(c, installer=fresh.owner)
    finally:
        drop_managed(fresh)


def test_uninstall_leaves_no_trace(managed_db):
    """(c) `pgcite uninstall` drops schema rag with every object and row it held, and nothing else: the
    database's catalogs are as before the install; pgcite's cluster-wide roles stay."""
    m = managed_db
    with psycopg.connect(m.dsn) as c:
        before = local_snapshot(c)
    assert cli("install", "--dsn", m.dsn)[0] == 0
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute("SELECT rag.create_tenant('m')")
    store_and_ask(m.dsn)
    add_reader(m)
    rc, out, err = cli("uninstall", "--dsn", m.dsn)
    assert rc == 0, err
    assert out.startswith("uninstalled pgcite")
    with psycopg.connect(m.dsn) as c:
        after = local_snapshot(c)
        assert c.execute("SELECT to_regnamespace('rag')").fetchone()[0] is None
        # nothing in this database refers to a pgcite role any more (owners, grants, policies)
        assert (
            c.execute(
                """SELECT count(*) FROM pg_shdepend AS s
                   WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                     AND s.refobjid IN (SELECT oid FROM pg_roles WHERE rolname LIKE 'pgcite\\_%')"""
            ).fetchone()[0]
            == 0
        )
        roles = {r[0] for r in c.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE 'pgcite\\_%'")}
    assert roles == {"pgcite_reader", "pgcite_writer", "pgcite_admin", "pgcite_owner"}
    before.pop("roles"), after.pop("roles")  # the reader role added by the test holds pgcite_reader
    assert after == before
    assert cli("uninstall", "--dsn", m.dsn)[:2] == (0, "pgcite was not installed in this database\n")


def test_install_twice_is_a_no_op(managed_db):
    """(e) Install again with nothing new: nothing runs, nothing changes."""
    m = managed_db
    assert cli("install", "--dsn", m.dsn)[0] == 0
    with psycopg.connect(m.dsn) as c:
        first = local_snapshot(c), catalog(c)
    rc, out, _ = cli("install", "--dsn", m.dsn)
    assert (rc, out) == (0, "pgcite 0.9.0 already installed; nothing to do\n")
    with psycopg.connect(m.dsn) as c:
        assert (local_snapshot(c), catalog(c)) == first
        assert c.execute("SELECT count(*) FROM rag.install_version").fetchone()[0] == 1


def test_concurrent_installers_install_once(managed_db):
    """Two installers at once: one installs, the other waits for it and then has nothing to do."""
    m = managed_db
    results: list[tuple[int, str, str]] = []
    threads = [
        threading.Thread(target=lambda: results.append(cli("install", "--dsn", m.dsn))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r[0] for r in results) == [0, 0], results
    assert sorted(r[1].split()[0] for r in results) == ["installed", "pgcite"]  # "pgcite 0.9.0 already ..."
    with psycopg.connect(m.dsn) as c:
        assert c.execute("SELECT count(*) FROM rag.install_version").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM rag.install_migration").fetchone()[0] == len(
            list((ROOT / "migrations").glob("*.sql"))
        )


def test_a_new_migration_runs_once_and_idempotent_files_run_every_time(managed_db, tmp_path):
    """The upgrade rule on sources of a next version: a migration not yet applied runs once (running it twice
    would fail here), every idempotent file runs again, and the same sources again change nothing."""
    m = managed_db
    assert cli("install", "--dsn", m.dsn)[0] == 0
    base = tmp_path / "src"
    for sub in ("migrations", "sql/core", "extension/released"):
        (base / sub).mkdir(parents=True)
        for f in (ROOT / sub).glob("*.sql"):
            (base / sub / f.name).write_bytes(f.read_bytes())
    control = (ROOT / "extension" / "pgcite.control").read_text().replace("'0.9.0'", "'0.9.1'")
    (base / "extension" / "pgcite.control").write_text(control)
    (base / "migrations" / "007-next.sql").write_text("CREATE TABLE rag.next_once (x integer);\n")
    access = (base / "sql" / "core" / "000-access.sql").read_text()
    old = "'The embedding model recorded for new chunks and questions"
    assert old in access
    (base / "sql" / "core" / "000-access.sql").write_text(access.replace(old, "'0.9.1: the embedding model"))
    src = inst.find_sources(base)
    assert src.version == "0.9.1"
    first = inst.install(m.dsn, sources=src)
    assert (first.action, first.previous, first.version, first.migrations) == (
        "upgraded",
        "0.9.0",
        "0.9.1",
        ["007-next.sql"],
    )
    again = inst.install(m.dsn, sources=src)
    assert again.action == "unchanged"
    with psycopg.connect(m.dsn) as c:
        assert (
            c.execute("SELECT obj_description('rag.model_name()'::regprocedure)")
            .fetchone()[0]
            .startswith("0.9.1: the embedding model")
        )
        assert c.execute("SELECT to_regclass('rag.next_once') IS NOT NULL").fetchone()[0]
        rows = c.execute("SELECT version FROM rag.install_version ORDER BY id").fetchall()
        assert [r[0] for r in rows] == ["0.9.0", "0.9.1"]
    # and back to the repository's 0.9.0: refused, it is older than what is installed
    rc, _, err = cli("install", "--dsn", m.dsn)
    assert rc == 2 and err.startswith("error [55000]: pgcite 0.9.1 is installed, newer than 0.9.0")


# ---------------------------------------------------------------------- refusals change nothing
def refused(m: Managed, *argv: str) -> tuple[str, str]:
    """Runs `pgcite install` (or argv), expects exit 2, checks nothing changed; returns (out, err)."""
    with psycopg.connect(m.pg.dsn(m.name)) as c:
        before = local_snapshot(c)
    rc, out, err = cli(*(argv or ("install", "--dsn", m.dsn)))
    assert rc == 2, (out, err)
    with psycopg.connect(m.pg.dsn(m.name)) as c:
        assert local_snapshot(c) == before
    return out, err


def test_refuses_without_a_requirement(managed_db):
    m = managed_db
    with m.admin() as c:
        c.execute("DROP EXTENSION fuzzystrmatch")
    _, err = refused(m)
    assert err.startswith(
        "error [55000]: pgcite needs these extensions in this database: fuzzystrmatch >= 1.1"
    )
    assert "hint: " in err and "CREATE EXTENSION IF NOT EXISTS fuzzystrmatch" in err
    with m.admin() as c:
        c.execute("DROP EXTENSION vector")
    _, err = refused(m)
    assert "vector >= 0.8 (not installed)" in err


def test_refuses_an_old_pgvector(managed_db):
    """pgvector 0.7 cannot be installed next to 0.8 here: the check is fed the state of a real database with
    only the version changed."""
    with psycopg.connect(managed_db.dsn) as c:
        state = inst.read_state(c)
    state.requirements["vector"] = "0.7.4"
    with pytest.raises(inst.InstallRefused) as e:
        inst.check(state, "0.9.0")
    assert e.value.sqlstate == "55000" and "vector >= 0.8 (found 0.7.4)" in e.value.message


def test_refuses_where_the_extension_is_installed_and_the_other_way_round(managed_db, fresh_db, pg):
    m = managed_db
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute("CREATE EXTENSION pgcite")  # trusted: the owner may
    _, err = refused(m)
    assert err.startswith("error [55000]: the extension pgcite 0.9.0 is installed in database")
    assert "ALTER EXTENSION pgcite UPDATE" in err
    _, err = refused(m, "uninstall", "--dsn", m.dsn)
    assert err.startswith("error [55000]: schema rag belongs to the extension pgcite")

    # CREATE EXTENSION pgcite where `pgcite install` installed: refused before it creates anything
    with m.admin() as c:
        c.execute("DROP EXTENSION pgcite")
        c.execute("DROP SCHEMA rag")  # left by the extension, owned by the superuser
    assert cli("install", "--dsn", m.dsn)[0] == 0
    for dsn in (m.dsn, pg.dsn(m.name)):  # the owner (trusted) and a superuser alike
        with psycopg.connect(dsn, autocommit=True) as c, pytest.raises(psycopg.Error) as e:
            c.execute("CREATE EXTENSION pgcite")
        assert sqlstate_of(e) == "55000"
        assert (
            "schema rag holds objects that are not part of extension pgcite" in e.value.diag.message_primary
        )
        assert "pgcite install" in e.value.diag.message_hint


def test_refuses_without_createrole_and_names_what_a_dba_runs(pg):
    """(d) An installer without CREATEROLE: refused before anything changes, with the exact statements a
    role with CREATEROLE runs first; after them the same command installs."""
    m = create_managed(pg, createrole=False)
    try:
        _, err = refused(m)
        assert err.startswith(f"error [42501]: role {m.owner} may not create or grant pgcite's roles")
        statements = err.split("runs first: ", 1)[1].strip()
        assert statements.endswith(f"GRANT pgcite_owner TO {m.owner};")
        with m.admin() as c:
            c.execute(statements)
        rc, out, err = cli("install", "--dsn", m.dsn)
        assert rc == 0, err
        # the membership the DBA granted stays: pgcite_owner owns pgcite's tables in every database
        assert err == (
            f"warning: role {m.owner} is still a member of pgcite_owner, which owns pgcite's tables in"
            " every database of this cluster: it can read and rewrite their pgcite data (audit logs included)"
            " wherever it may connect. A DBA revokes it after installing:"
            f" REVOKE pgcite_owner FROM {m.owner};\n"
        )
        with psycopg.connect(m.dsn, autocommit=True) as c:
            c.execute("SELECT rag.create_tenant('m')")
        store_and_ask(m.dsn)
        assert cli("uninstall", "--dsn", m.dsn)[0] == 0
    finally:
        drop_managed(m)  # also ends its membership of pgcite_owner


def test_refuses_an_unknown_release(managed_db):
    _, err = refused(managed_db, "install", "--dsn", managed_db.dsn, "--version", "0.0.9")
    assert err.startswith(
        "error [22023]: no released script of pgcite 0.0.9 "
        "(released: 0.1.0, 0.2.0, 0.3.0, 0.4.0, 0.5.0, 0.6.0, 0.7.0, 0.8.0"
    )


def test_refuses_a_schema_rag_it_did_not_make(managed_db):
    m = managed_db
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute("CREATE SCHEMA rag")
    _, err = refused(m)
    assert err.startswith("error [55000]: schema rag exists but was not created by `pgcite install`")
    _, err = refused(m, "uninstall", "--dsn", m.dsn)
    assert "not dropping it" in err


def test_a_release_script_binding_to_another_roles_function_is_refused(managed_db):
    """A role that may create in schema public plants setweight(tsvector, text): the 0.3.0 script (run with
    rag, public first, as CREATE EXTENSION ran it) would bind rag.chunk.tsv to it; the trust check refuses and
    the whole install rolls back."""
    m = managed_db
    planter = f"{m.owner}_planter"
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute(f"CREATE ROLE {planter}")
        c.execute(f"GRANT CREATE ON SCHEMA public TO {planter}")
    with m.admin() as c:
        c.execute(f"SET ROLE {planter}")
        c.execute(
            "CREATE FUNCTION public.setweight(tsvector, text) RETURNS tsvector LANGUAGE sql IMMUTABLE"
            " AS 'SELECT $1'"
        )
    _, err = refused(m, "install", "--dsn", m.dsn, "--version", "0.3.0")
    assert err.startswith("error [42501]: sql/core/095-trust.sql: pgcite's objects would call code")
    assert "setweight(tsvector,text)" in err
    # today's sources qualify what they call: the same planted function is never bound
    assert cli("install", "--dsn", m.dsn)[0] == 0
    with psycopg.connect(m.dsn) as c:
        assert (
            c.execute(
                "SELECT count(*) FROM pg_depend"
                " WHERE refobjid = 'public.setweight(tsvector, text)'::regprocedure"
            ).fetchone()[0]
            == 0
        )


# ---------------------------------------------------------------------- the trusted core extension
@pytest.fixture
def plain_owner_db(pg):
    """A database owner with no CREATEROLE, and only pgvector created by the superuser (the one requirement
    that is not trusted); pg_trgm and fuzzystrmatch are trusted: CREATE EXTENSION pgcite CASCADE adds them."""
    m = create_managed(pg, createrole=False)
    with m.admin() as c:
        c.execute("DROP EXTENSION pg_trgm, fuzzystrmatch")
    try:
        yield m
    finally:
        drop_managed(m)


def test_trusted_extension_by_a_database_owner(plain_owner_db):
    """The owner of a database, not a superuser and without CREATEROLE, installs the core, administers it in
    its database, stores and asks; a reader (given pgcite_reader by the superuser) asks too."""
    m = plain_owner_db
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute("CREATE EXTENSION pgcite CASCADE")
        exts = dict(c.execute("SELECT extname, extowner::regrole::text FROM pg_extension").fetchall())
        assert exts["pgcite"] == m.owner and exts["pg_trgm"] == m.owner and exts["vector"] != m.owner
        with pytest.raises(psycopg.Error) as e:
            c.execute("CREATE EXTENSION pgcite_python CASCADE")  # needs plpython3u: superuser only
        assert sqlstate_of(e) == "42501"
        # an administrator of this database without any cluster-wide pgcite role
        assert (
            c.execute(
                "SELECT pg_has_role('pgcite_admin', 'MEMBER') OR pg_has_role('pgcite_owner', 'MEMBER')"
            ).fetchone()[0]
            is False
        )
        c.execute("SELECT rag.create_tenant('m')")
        assert c.execute("SELECT rag.set_config('min_score', '0.4')").fetchone()[0] == "0.4"
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT rag.set_config('model', 'other/model')")
        assert sqlstate_of(e) == "42501"
    store_and_ask(m.dsn)
    reader = add_reader(m, by_owner=False)
    ask(reader)
    with psycopg.connect(reader, autocommit=True) as c:
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT rag.create_tenant('x')")
        assert sqlstate_of(e) == "42501"
        assert c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0] == 2


def test_trusted_install_gives_the_owner_nothing_beyond_its_database(pg, plain_owner_db, fresh_db):
    """Attacks by the installing owner: functions and operators planted in its schema public before the
    install are never bound; after it, the owner cannot act as pgcite_owner, write pgcite's tables, change
    schema rag, or administer pgcite in another database."""
    m = plain_owner_db
    with psycopg.connect(m.dsn, autocommit=True) as c:
        # would run as pgcite_owner (or as a superuser restoring a dump) if a stored expression bound to them
        c.execute(
            "CREATE FUNCTION public.evil(float8, integer) RETURNS boolean LANGUAGE plpgsql IMMUTABLE"
            " AS $$ BEGIN RAISE EXCEPTION 'evil ran as %', current_user; END $$"
        )
        c.execute("CREATE OPERATOR public.> (LEFTARG = float8, RIGHTARG = integer, FUNCTION = public.evil)")
        c.execute(
            "CREATE FUNCTION public.setweight(tsvector, text) RETURNS tsvector LANGUAGE plpgsql IMMUTABLE"
            " AS $$ BEGIN RAISE EXCEPTION 'evil setweight ran as %', current_user; END $$"
        )
        # releases before 0.4.0 were not made for it: installing them (then updating) is a superuser's job
        for old in ("0.1.0", "0.3.0"):
            with pytest.raises(psycopg.Error) as e:
                c.execute(f"CREATE EXTENSION pgcite VERSION '{old}' CASCADE")
            assert sqlstate_of(e) == "42501" and "permission denied" in e.value.diag.message_primary
        c.execute("CREATE EXTENSION pgcite CASCADE")
        bound = c.execute(
            """SELECT count(*) FROM pg_depend
               WHERE refobjid IN ('public.evil(float8, integer)'::regprocedure,
                                  'public.setweight(tsvector, text)'::regprocedure)
                  OR refobjid IN (SELECT oid FROM pg_operator WHERE oprcode = 'public.evil'::regproc)"""
        ).fetchone()[0]
        assert bound == 1  # only the operator's own dependency on its function
        c.execute("SELECT rag.create_tenant('m')")
        c.execute(
            "SELECT rag.create_generator('g', 'http://127.0.0.1:9/v1', 'm', timeout_s => 5)"
        )  # CHECK (timeout_s > 0 ...) did not call public.>
    store_and_ask(m.dsn)  # rag.chunk.tsv did not call public.setweight

    attempts = {
        "SET ROLE pgcite_owner": "42501",
        f"GRANT pgcite_owner TO {m.owner}": "42501",
        f"GRANT pgcite_admin TO {m.owner}": "42501",
        "CREATE FUNCTION rag.f() RETURNS int LANGUAGE sql AS 'SELECT 1'": "42501",
        "ALTER SCHEMA rag RENAME TO rag_old": "42501",
        "ALTER SCHEMA rag OWNER TO CURRENT_USER": "42501",
        "INSERT INTO rag.config (name, value, set_by) VALUES ('min_score', '0', 'x')": "42501",
        "UPDATE rag.ask_log SET question = 'forged'": "42501",
        "SELECT * FROM rag.generator": "42501",
        "DROP TABLE rag.ask_log": "42501",
        "ALTER FUNCTION rag._ask_log_append_only() OWNER TO CURRENT_USER": "42501",
    }
    with psycopg.connect(m.dsn, autocommit=True) as c:
        for statement, code in attempts.items():
            with pytest.raises(psycopg.Error) as e:
                c.execute(statement)
            assert sqlstate_of(e) == code, statement
        assert c.execute("SELECT count(*) FROM rag.ask_log WHERE question = 'forged'").fetchone()[0] == 0

    # the owner's schema public swapped for one with its own operator %: pgcite refuses rather than call it
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute("ALTER SCHEMA public RENAME TO public_real")
        c.execute("CREATE SCHEMA public")
        c.execute("GRANT USAGE ON SCHEMA public TO PUBLIC")
        c.execute(
            "CREATE FUNCTION public.evil_match(text, text) RETURNS boolean LANGUAGE plpgsql STABLE"
            " AS $$ BEGIN RAISE EXCEPTION 'evil %% ran as %', current_user; END $$"
        )
        c.execute("CREATE OPERATOR public.% (LEFTARG = text, RIGHTARG = text, FUNCTION = public.evil_match)")
        for call in (
            "SELECT status FROM rag.ask('Which index handles ranges?', 'm', 2, %s::public_real.vector)",
            "SELECT status FROM rag._ask(current_user, 'Which index?', 'm', 2, %s::public_real.vector, '{}')",
        ):
            with pytest.raises(psycopg.Error) as e:
                c.execute(call, (vec(E2),))
            assert sqlstate_of(e) in ("55000", "42704"), e.value.diag.message_primary
            assert "evil" not in str(e.value)
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT rag._ask(current_user, 'Which index?', 'm', 2, NULL, '{}')")
        assert sqlstate_of(e) == "55000"
        assert "schema public no longer holds" in e.value.diag.message_primary
        c.execute("DROP SCHEMA public CASCADE")
        c.execute("ALTER SCHEMA public_real RENAME TO public")
    ask(m.dsn)

    # another database of the cluster with pgcite: the owner is nobody there
    with pg.admin(fresh_db) as c:
        c.execute("CREATE EXTENSION pgcite CASCADE")
    with psycopg.connect(m.dsn_as(m.owner, m.password).replace(m.name, fresh_db), autocommit=True) as c:
        for statement in ("SELECT rag.create_tenant('x')", "SELECT rag._create_tenant(current_user, 'x')"):
            with pytest.raises(psycopg.Error) as e:
                c.execute(statement)
            assert sqlstate_of(e) == "42501", statement


def test_trusted_install_refuses_what_it_would_adopt(pg, plain_owner_db):
    """Objects already in schema rag, pgcite roles that can log in, and non-superuser members of pgcite_owner
    are refused before anything is created."""
    m = plain_owner_db
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute("CREATE SCHEMA rag")
        c.execute(
            "CREATE FUNCTION rag._apply_grants(n integer DEFAULT 0) RETURNS int LANGUAGE sql AS 'SELECT 1'"
        )
        with pytest.raises(psycopg.Error) as e:
            c.execute("CREATE EXTENSION pgcite CASCADE")
        assert sqlstate_of(e) == "55000" and "rag._apply_grants(integer)" in e.value.diag.message_primary
        c.execute("DROP SCHEMA rag CASCADE")
        # an empty schema rag whose maker let everyone create in it: CREATE EXTENSION used it, privileges and
        # all, so the owner could add rag._setting(text, integer) afterwards, a better match for a call in
        # rag._check_bytes, and pgcite_owner ran it on every store (it could set python_path, say)
        c.execute("CREATE SCHEMA rag")
        c.execute("GRANT ALL ON SCHEMA rag TO PUBLIC")
        with pytest.raises(psycopg.Error) as e:
            c.execute("CREATE EXTENSION pgcite CASCADE")
        assert sqlstate_of(e) == "55000"
        assert e.value.diag.message_primary == (
            "schema rag grants privileges that pgcite does not: CREATE to PUBLIC, USAGE to PUBLIC"
        )
        c.execute("DROP SCHEMA rag")
    with pg.admin() as a:
        a.execute("ALTER ROLE pgcite_reader LOGIN")
        try:
            with psycopg.connect(m.dsn, autocommit=True) as c, pytest.raises(psycopg.Error) as e:
                c.execute("CREATE EXTENSION pgcite CASCADE")
            assert sqlstate_of(e) == "42501" and "pgcite_reader" in e.value.diag.message_primary
        finally:
            a.execute("ALTER ROLE pgcite_reader NOLOGIN")
        a.execute(f"GRANT pgcite_owner TO {m.owner}")
        try:
            with psycopg.connect(m.dsn, autocommit=True) as c, pytest.raises(psycopg.Error) as e:
                c.execute("CREATE EXTENSION pgcite CASCADE")
            assert sqlstate_of(e) == "42501" and m.owner in e.value.diag.message_primary
        finally:
            a.execute(f"REVOKE pgcite_owner FROM {m.owner}")
        # what a pgcite role is a member of, every tenant role of every database would be (here: read any
        # file of the server)
        a.execute("GRANT pg_read_server_files TO pgcite_reader")
        try:
            with psycopg.connect(m.dsn, autocommit=True) as c, pytest.raises(psycopg.Error) as e:
                c.execute("CREATE EXTENSION pgcite CASCADE")
            assert sqlstate_of(e) == "42501"
            assert "pgcite_reader is a member of pg_read_server_files" in e.value.diag.message_primary
        finally:
            a.execute("REVOKE pg_read_server_files FROM pgcite_reader")
    with psycopg.connect(m.dsn, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM pg_extension WHERE extname LIKE 'pgcite%'").fetchone()[0] == 0
        c.execute("CREATE EXTENSION pgcite CASCADE")  # and with all of that gone, it installs


def test_an_install_reads_its_sql_as_written_whatever_the_session(pg, plain_owner_db, managed_db):
    """standard_conforming_strings = off in the installing session (a trusted CREATE EXTENSION) or in the
    installing role's settings (`pgcite install`) used to change the function bodies' literals:
    rag._apply_grants matched every function and granted rag.ask to writers only and rag.create_tenant to
    writers. Now both
    installs grant what a default session does, and a reader asks."""
    checks = (
        "SELECT has_function_privilege('pgcite_reader', 'rag.ask(text,text,integer,public.vector,jsonb)',"
        " 'EXECUTE'),"
        " has_function_privilege('pgcite_writer', 'rag.create_tenant(text,regconfig)', 'EXECUTE'),"
        " has_function_privilege('pgcite_writer', 'rag.set_config(text,text)', 'EXECUTE')"
    )
    m = plain_owner_db
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute("SET standard_conforming_strings = off")
        c.execute("CREATE EXTENSION pgcite CASCADE")
        assert c.execute(checks).fetchone() == (True, False, False)
        c.execute("SELECT rag.create_tenant('m')")
    store_and_ask(m.dsn)
    ask(add_reader(m, by_owner=False))
    m = managed_db
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute(f"ALTER ROLE {m.owner} SET standard_conforming_strings = off")
    assert cli("install", "--dsn", m.dsn)[0] == 0
    with psycopg.connect(m.dsn, autocommit=True) as c:
        assert c.execute("SHOW standard_conforming_strings").fetchone()[0] == "off"
        assert c.execute(checks).fetchone() == (True, False, False)


def test_default_privileges_of_the_creating_role_are_refused(pg, managed_db, plain_owner_db):
    """Default privileges of the role that creates pgcite's objects used to be applied to them: after
    `pgcite install` by an owner with ALTER DEFAULT PRIVILEGES ... TO helper, helper could setval the log's
    sequence to its maximum (every ask of every tenant failed) and read the embeddings. Refused (55000),
    nothing installed; without them, helper holds nothing on any rag object. The same for the superuser that
    a trusted CREATE EXTENSION runs as."""
    m = managed_db
    helper = f"{m.owner}_helper"
    grants = {"TABLES": "SELECT", "SEQUENCES": "USAGE, UPDATE", "SCHEMAS": "USAGE", "FUNCTIONS": "EXECUTE"}
    with psycopg.connect(m.dsn, autocommit=True) as c:
        c.execute(f"CREATE ROLE {helper}")
        for kind, what in grants.items():
            c.execute(f"ALTER DEFAULT PRIVILEGES GRANT {what} ON {kind} TO {helper}")
        before = local_snapshot(c)
    rc, _, err = cli("install", "--dsn", m.dsn)
    assert rc == 2
    assert err.startswith(
        f"error [55000]: migrations/000-prerequisites.sql: role {m.owner} has default privileges"
        " that would apply"
    )
    # an older release (whose own prerequisite checks predate this one) is checked by today's first
    rc, _, err = cli("install", "--dsn", m.dsn, "--version", "0.4.0")
    assert rc == 2 and err.startswith(
        f"error [55000]: migrations/000-prerequisites.sql: role {m.owner} has default privileges"
    ), err
    with psycopg.connect(m.dsn, autocommit=True) as c:
        assert local_snapshot(c) == before
        for kind, what in grants.items():
            c.execute(f"ALTER DEFAULT PRIVILEGES REVOKE {what} ON {kind} FROM {helper}")
    assert cli("install", "--dsn", m.dsn)[0] == 0
    with psycopg.connect(m.dsn, autocommit=True) as c:
        held = c.execute(
            """SELECT count(*) FROM (
                 SELECT relacl AS acl FROM pg_class WHERE relnamespace = 'rag'::regnamespace
                 UNION ALL SELECT proacl FROM pg_proc WHERE pronamespace = 'rag'::regnamespace
                 UNION ALL SELECT nspacl FROM pg_namespace WHERE nspname = 'rag') AS x,
               aclexplode(x.acl) AS a WHERE a.grantee = %s::regrole""",
            (helper,),
        ).fetchone()[0]
        assert held == 0
    superuser = superuser_name(pg)
    with plain_owner_db.admin() as a:
        a.execute(f"ALTER DEFAULT PRIVILEGES FOR ROLE {superuser} GRANT SELECT ON TABLES TO {helper}")
        try:
            with psycopg.connect(plain_owner_db.dsn, autocommit=True) as c, pytest.raises(psycopg.Error) as e:
                c.execute("CREATE EXTENSION pgcite CASCADE")
            assert sqlstate_of(e) == "55000" and superuser in e.value.diag.message_primary
        finally:
            a.execute(f"ALTER DEFAULT PRIVILEGES FOR ROLE {superuser} REVOKE SELECT ON TABLES FROM {helper}")
        assert a.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pgcite'").fetchone()[0] == 0


# ---------------------------------------------------------------------- the package carries its SQL
def test_installed_package_finds_the_sql(tmp_path):
    """`pip install .` (not editable) puts the SQL into the package; the installed module finds it there."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(ROOT)],
        check=True,
        capture_output=True,
    )
    code = (
        "import json\nfrom pgcite.install import find_sources\ns = find_sources()\n"
        "print(json.dumps([str(s.root), s.version, [p.name for p in s.migrations], [p.name for p in s.core],"
        " sorted(s.released)]))"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    root, version, migrations, core, released = json.loads(run.stdout)
    assert Path(root) == target / "pgcite" / "sql"
    assert version == inst.find_sources().version == "0.9.0"
    assert migrations == sorted(p.name for p in (ROOT / "migrations").glob("*.sql"))
    assert core == sorted(p.name for p in (ROOT / "sql" / "core").glob("*.sql"))
    assert released == ["0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0"]
    for name in migrations:  # the same bytes, not a second copy kept in the repository
        assert (target / "pgcite/sql/migrations" / name).read_bytes() == (
            ROOT / "migrations" / name
        ).read_bytes()


def test_always_run_migration_matches_the_extension_update_scripts():
    """`pgcite install` re-runs 000-prerequisites on every upgrade, as the extension's update scripts do."""
    text = (ROOT / "extension" / "Makefile").read_text()
    line = next(x for x in text.splitlines() if x.startswith("MIGRATIONS_SINCE_PREVIOUS :="))
    assert line.split(":=")[1].split()[0] == f"../migrations/{inst.ALWAYS_RUN}"
