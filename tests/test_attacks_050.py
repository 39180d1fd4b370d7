"""Security round 3: what 0.5.0 added, attacked as a hostile role would (docs/BENCHMARKS.md "Security round
3").  Spelling correction (rag.correct_question is public now), the in-database Python a reader can call with
arrays of its own making, the writers' client-side helpers (rag.embedded_texts), the per-tenant retrieval
statistics and indexes, tenant names and collations. Each test logs in as an ordinary role, tries one attack
and asserts the safe outcome: a documented SQLSTATE, bounded work, nothing of another tenant changed or seen.
The check of rag.embed_many is in pgcite_udfs: it runs where the database's venv holds this checkout's (after
make setup), or with PGCITE_TEST_PYTHON_PATH naming a site-packages that does."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest
from conftest import connect, create_icu_database, drop_database, drop_database_and_roles, fails, use_db_venv

ROOT = Path(__file__).resolve().parents[1]
CURRENT = next(  # the version this checkout installs
    line.split("'")[1]
    for line in (ROOT / "extension" / "pgcite.control").read_text().splitlines()
    if line.startswith("default_version")
)
SFX = uuid.uuid4().hex[:6]
R = {k: f"{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo")}
ALPHA_DOC = (
    "# Alpha handbook\n\nThe alpha team vacuums its tables every night at two.\n\n"
    "## Indexes\n\nA B-tree index handles equality and range queries on sortable data.\n"
)
BRAVO_DOC = "# Bravo secrets\n\nThe launch code of tenant bravo is pelican-orange-42.\n"

# 40 made-up words of ten letters (no English word, no shared trigram runs), each written into tenant
# charlie's corpus; a question misspells each of them by one deleted letter
_rnd = random.Random(50)
WORDS = [
    "".join(_rnd.choice("bcdfghjklmnpqrstvwxz") + _rnd.choice("aeiou") for _ in range(5)) for _ in range(40)
]
MISSPELT = [w[:4] + w[5:] for w in WORDS]
CHARLIE_DOC = (
    "# Charlie glossary\n\n" + "\n\n".join(f"The word {w} is in the glossary." for w in WORDS) + "\n"
)


@pytest.fixture(scope="module")
def adb(pg):
    name = f"pgcite_attack050_{SFX}"
    drop_database(pg, name)
    with pg.admin() as a:
        a.execute(f'CREATE DATABASE "{name}"')
    with pg.admin(name) as c:
        c.execute("CREATE EXTENSION pgcite_python CASCADE")
        use_db_venv(c)
        if os.environ.get(
            "PGCITE_TEST_PYTHON_PATH"
        ):  # a DB-side site-packages with this checkout's pgcite_udfs
            c.execute("SELECT rag.set_config('python_path', %s)", (os.environ["PGCITE_TEST_PYTHON_PATH"],))
        c.execute(f"CREATE ROLE {R['reader']} LOGIN IN ROLE pgcite_reader")
        c.execute(f"CREATE ROLE {R['writer']} LOGIN IN ROLE pgcite_writer")
        c.execute(f"CREATE ROLE {R['admin']} LOGIN IN ROLE pgcite_admin")
        c.execute(f"CREATE ROLE {R['bravo']} LOGIN IN ROLE pgcite_writer")
        for tenant in ("alpha", "bravo", "charlie"):
            c.execute("SELECT rag.create_tenant(%s)", (tenant,))
        for role in ("reader", "writer"):
            c.execute("SELECT rag.grant_tenant('alpha', %s)", (R[role],))
            c.execute("SELECT rag.grant_tenant('charlie', %s)", (R[role],))
        c.execute("SELECT rag.grant_tenant('bravo', %s)", (R["bravo"],))
        c.execute("SELECT * FROM rag.ingest('alpha', 'a.md', %s)", (ALPHA_DOC,))
        c.execute("SELECT * FROM rag.ingest('bravo', 'b.md', %s)", (BRAVO_DOC,))
        c.execute("SELECT * FROM rag.ingest('charlie', 'c.md', %s)", (CHARLIE_DOC,))
    yield name
    drop_database_and_roles(pg, name, R.values())


def stats_of(c, tenant: str) -> tuple:
    """A tenant's rows of the three retrieval statistics tables (as the superuser)."""
    return tuple(
        c.execute(
            f"SELECT md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM rag.{t} AS x"
            " WHERE x.tenant = %s",
            (tenant,),
        ).fetchone()[0]
        for t in ("tenant_stat", "tenant_lexeme", "tenant_title")
    )


# ---------------------------------------------------------------- spelling correction
def test_spelling_correction_internals_are_not_callable_by_tenant_roles(pg, adb):
    """rag.correct_question (public in 0.5.0) ran rag._correct_question as the reader, so readers held EXECUTE
    on it and on rag._common_words (PL/Python): called directly, neither had the 4,000-character limit. A
    reader's rag._correct_question of a 4 MB question (800,000 unknown words, each a trigram search of the
    table-wide index) ran for as long as statement_timeout allowed; rag._common_words of an array it built
    with array_fill held 5 million Python strings before its first chance to be cancelled. Now only
    pgcite_owner may run them: rag.correct_question checks the caller, the tenant and the limit in a SECURITY
    DEFINER function."""
    for role in ("reader", "writer", "admin"):
        with connect(pg, adb, R[role]) as c:
            assert (
                fails(c, "SELECT rag._correct_question('alpha', repeat('vacum ', 700000), '{}')") == "42501"
            )
            assert fails(c, "SELECT rag._common_words(array_fill('abcd'::text, ARRAY[5000000]))") == "42501"
    with connect(pg, adb, R["reader"]) as c:
        # the public function still corrects, as rag.ask does, with the limit and the tenant check
        row = c.execute(
            "SELECT rag.correct_question('Which index handles range quries?', 'alpha')"
        ).fetchone()
        assert row[0] == "which index handles range queries"
        assert fails(c, "SELECT rag.correct_question(repeat('vacum ', 1000), 'alpha')") == "54000"
        assert fails(c, "SELECT rag.correct_question('vacum', 'bravo')") == "42501"
        assert fails(c, "SELECT rag.correct_question('vacum', 'nosuchtenant')") == "42704"
        # naming another role than oneself is refused like every internal entry point
        assert fails(c, "SELECT rag._correct_question_for(%s, 'x', 'bravo')", (R["bravo"],)) == "42501"


def test_spelling_correction_fixes_a_bounded_number_of_words(pg, adb):
    """Each unknown word of four letters or more is a trigram search (15-29 ms at 1M chunks): a question of
    4,000 characters holds 800 of them, about 20 s of CPU per rag.ask. Only the first 16 distinct unknown
    words (in question order) are corrected; the rest are kept as they are written."""
    question = " ".join(MISSPELT)
    with connect(pg, adb, R["reader"]) as c:
        # each misspelling alone is corrected to its word (the corpus is right for the test)
        one = c.execute("SELECT rag.correct_question(%s, 'charlie')", (MISSPELT[20],)).fetchone()[0]
        assert one == WORDS[20]
        corrected = c.execute("SELECT rag.correct_question(%s, 'charlie')", (question,)).fetchone()[0].split()
        assert corrected == WORDS[:16] + MISSPELT[16:]
        # rag.ask reads the question the same way (its evidence shows the corrected question)
        ev = c.execute("SELECT evidence FROM rag.ask(%s, 'charlie')", (question,)).fetchone()[0]
        assert ev["gate"]["corrected_question"].split() == WORDS[:16] + MISSPELT[16:]


# ---------------------------------------------------------------- Python a reader calls with its own arrays
def test_embed_many_refuses_more_texts_than_a_document_may_have(pg, adb):
    """rag.embed_many counted the bytes of its texts, not the texts: array_fill(NULL::text, ARRAY[20000000])
    is 2.5 MB, has no bytes, and its result list of 20 million (ord, NULL) pairs took 2.4 GB of the backend
    for 3.4 s before a 1 s statement_timeout could stop it (134 million elements, PostgreSQL's limit, would
    take about 16 GB). Now a call takes at most as many texts as a document may have chunks and sentences (one
    per 64 bytes of max_document_bytes): 54000, before any list is built."""
    with connect(pg, adb, R["reader"]) as c:
        site = c.execute("SELECT rag.python_info()").fetchone()[0]["site_packages"]
        runs = Path(site) / "pgcite_udfs" / "udf.py"
        if (
            not runs.exists()
            or runs.read_bytes() != (ROOT / "python_udfs" / "pgcite_udfs" / "udf.py").read_bytes()
        ):
            pytest.skip(
                f"the database runs another pgcite_udfs ({runs}) than this checkout's: run make setup"
            )
        assert (
            fails(c, "SELECT count(*) FROM rag.embed_many(array_fill(NULL::text, ARRAY[400000]))") == "54000"
        )
        assert fails(c, "SELECT count(*) FROM rag.embed_many(array_fill(''::text, ARRAY[400000]))") == "54000"
        rows = c.execute(
            "SELECT ord, embedding IS NULL FROM rag.embed_many(ARRAY['a', NULL]) ORDER BY 1"
        ).fetchall()
        assert rows == [(1, False), (2, True)]
        n = c.execute("SELECT count(*) FROM rag.embed_many(array_fill(NULL::text, ARRAY[1000]))").fetchone()[
            0
        ]
        assert n == 1000


def test_embedded_texts_takes_a_bounded_number_of_hashes(pg, adb):
    """rag.embedded_texts (0.5.0, writers) took any number of hashes: each is an index probe and a call of
    rag._reused_sentences. Now at most one per chunk a document may have (max_document_bytes / 64): 54000."""
    with connect(pg, adb, R["writer"]) as c:
        assert (
            fails(
                c,
                "SELECT count(*) FROM rag.embedded_texts('alpha', array_fill('\\x00'::bytea, ARRAY[400000]))",
            )
            == "54000"
        )
        # under the limit it still answers: a stored chunk text's hash (with its sentences) is found
        known = c.execute(
            "SELECT content_hash FROM rag.chunk WHERE tenant = 'alpha' AND retired_at IS NULL"
            " ORDER BY chunk_id LIMIT 1"
        ).fetchone()[0]
        got = c.execute(
            "SELECT array_agg(content_hash) FROM rag.embedded_texts('alpha', ARRAY[%s, '\\x00'::bytea])",
            (known,),
        ).fetchone()[0]
        assert got == [known]
        assert fails(c, "SELECT count(*) FROM rag.embedded_texts('bravo', ARRAY['\\x00'::bytea])") == "42501"
        # nor may it ask whether another tenant holds a body, or store into it
        sql = "SELECT * FROM rag.document_unchanged('bravo', 'b.md', %s, 'auto', 1)"
        assert fails(c, sql, (BRAVO_DOC,)) == "42501"
        parsed = {"model": "m", "format": "markdown", "chunker_version": 1, "empty_sections": 0, "chunks": []}
        sql = "SELECT * FROM rag.store_parsed('bravo', 'x.md', 'x', 'auto', %s)"
        assert fails(c, sql, (json.dumps(parsed),)) == "42501"


# ---------------------------------------------------------------- retrieval statistics (0.5.0)
def test_retrieval_statistics_are_unreadable_and_another_tenants_writes_leave_them(pg, adb):
    """rag.tenant_stat, rag.tenant_lexeme and rag.tenant_title hold every tenant's vocabulary and titles: no
    tenant role may read them, and a writer's ingest, new version and delete in its tenant change no row of
    another tenant's; after them the tables are what a rebuild from rag.chunk makes."""
    for role in ("reader", "writer", "admin"):
        with connect(pg, adb, R[role]) as c:
            for t in ("tenant_stat", "tenant_lexeme", "tenant_title"):
                assert fails(c, f"SELECT count(*) FROM rag.{t}") == "42501"
            for f in ("rag._rebuild_retrieval_stats()", "rag._index_tenants(1)", "rag._live_chunks('bravo')"):
                assert fails(c, f"SELECT * FROM {f}") == "42501"
    with pg.admin(adb) as a:
        bravo = stats_of(a, "bravo")
    with connect(pg, adb, R["writer"]) as c:
        # the same title and words as bravo's, so the rows would share keys if the tenant were lost
        doc = "# Bravo secrets\n\nThe launch code of tenant alpha is heron-blue-7.\n"
        c.execute("SELECT * FROM rag.ingest('alpha', 'mimic.md', %s)", (doc,))
        c.execute("SELECT * FROM rag.ingest('alpha', 'mimic.md', %s)", (doc + "\nMore launch words.\n",))
        c.execute("SELECT rag.delete_document('alpha', 'mimic.md')")
    with pg.admin(adb) as a:
        assert stats_of(a, "bravo") == bravo
        kept = {t: stats_of(a, t) for t in ("alpha", "bravo", "charlie")}
        with a.transaction(force_rollback=True):
            a.execute("SELECT rag._rebuild_retrieval_stats()")
            assert {t: stats_of(a, t) for t in ("alpha", "bravo", "charlie")} == kept


# ---------------------------------------------------------------- tenant names
@pytest.mark.parametrize(
    "name",
    ["a'b", "a\\b", "a$b", 'a"b', "x" * 64, "caf\u00e9", "a b", "-a", "", "a;DROP TABLE rag.chunk"],
)
def test_tenant_names_that_could_break_quoting_are_refused(pg, adb, name):
    """Tenant names reach EXECUTE-built queries (%L) and index names (md5): only 1-63 of [A-Za-z0-9_.-]
    exist."""
    with connect(pg, adb, R["admin"]) as c:
        assert fails(c, "SELECT rag.create_tenant(%s)", (name,)) == "22023"
    with pg.admin(adb) as a:
        assert a.execute("SELECT count(*) FROM rag.tenant WHERE tenant = %s", (name,)).fetchone()[0] == 0


def test_tenants_differing_in_case_have_their_own_rows_and_index(pg, adb):
    """'Case' and 'case' are two tenants: the per-tenant index of one is never the other's, and each
    retrieves only its own chunks, past the five calls after which PL/pgSQL may cache a generic plan."""
    with pg.admin(adb) as a:
        for tenant, secret in (("Case", "upper-lynx-11"), ("case", "lower-otter-22")):
            a.execute("SELECT rag.create_tenant(%s)", (tenant,))
            a.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, R["reader"]))
            a.execute(
                "SELECT * FROM rag.ingest(%s, 'k.md', %s)",
                (tenant, f"# Keys\n\nThe key of this tenant is {secret}.\n"),
            )
        built = a.execute("SELECT tenant, index_name FROM rag._index_tenants(1, 'Case')").fetchall()
        assert {t for t, _ in built} == {"Case"}
        names = a.execute("SELECT rag._tenant_index_name('Case'), rag._tenant_index_name('case')").fetchone()
        assert names[0] != names[1]
        assert a.execute("SELECT to_regclass('rag.' || %s)", (names[1],)).fetchone()[0] is None
        ids = {
            t: {r[0] for r in a.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = %s", (t,)).fetchall()}
            for t in ("Case", "case")
        }
    with connect(pg, adb, R["reader"]) as c:
        for _ in range(7):
            for tenant in ("Case", "case"):
                got = {
                    r[0]
                    for r in c.execute(
                        "SELECT chunk_id FROM rag.retrieve('What is the key of this tenant?', %s, 5)",
                        (tenant,),
                    )
                }
                assert got and got <= ids[tenant]


def test_a_case_insensitive_database_collation_keeps_tenants_apart(pg):
    """The hot tenant comparisons collate "default" (the database's): with an ICU default that compares 'Docs'
    and 'docs' at level 2 (case-insensitively), they still are two tenants, each with its own statistics row
    and its own answers (PostgreSQL's database collations are deterministic: equal only when the bytes
    are)."""
    name = f"pgcite_icu_{SFX}"
    reader = f"icureader_{SFX}"
    create_icu_database(pg, name, "und-u-ks-level2")
    try:
        with pg.admin(name) as c:
            c.execute("CREATE EXTENSION pgcite_python CASCADE")
            use_db_venv(c)
            assert c.execute("SELECT 'Docs' = 'docs', 'Docs' < 'docs' OR 'Docs' > 'docs'").fetchone() == (
                False,
                True,
            )
            c.execute(f"CREATE ROLE {reader} LOGIN IN ROLE pgcite_reader")
            for tenant, secret in (("Docs", "granite-falcon-5"), ("docs", "velvet-badger-9")):
                c.execute("SELECT rag.create_tenant(%s)", (tenant,))
                c.execute(
                    "SELECT * FROM rag.ingest(%s, 'k.md', %s)",
                    (tenant, f"# Launch\n\nThe launch code of this tenant is {secret}.\n"),
                )
            c.execute("SELECT rag.grant_tenant('docs', %s)", (reader,))
            # one chunk per tenant: every word is in every chunk (generic to the gate) and nothing is
            # calibrated; whether the gate passes is not this test's concern, which tenant's chunk answers is
            c.execute("SELECT rag.set_config('min_score', '0.4')")
            assert (
                c.execute("SELECT count(*) FROM rag.tenant_stat WHERE tenant IN ('Docs', 'docs')").fetchone()[
                    0
                ]
                == 2
            )
            assert c.execute("SELECT rag._live_chunks('Docs'), rag._live_chunks('docs')").fetchone() == (1, 1)
        with connect(pg, name, reader) as c:
            for _ in range(7):
                row = c.execute(
                    "SELECT status, answer FROM rag.ask('What is the launch code?', 'docs')"
                ).fetchone()
                assert "velvet-badger-9" in (row[1] or "") and "granite" not in (row[1] or "")
            assert fails(c, "SELECT * FROM rag.ask('What is the launch code?', 'Docs')") == "42501"
    finally:
        drop_database(pg, name)
        with pg.admin() as a:
            a.execute(f"DROP ROLE IF EXISTS {reader}")


# ---------------------------------------------------------------- restore: moving data between install kinds
def pg_bin(name: str) -> str:
    pg_config = (
        os.environ.get("PG_CONFIG")
        or subprocess.run([str(ROOT / "scripts/pg_config.sh")], capture_output=True, text=True).stdout.strip()
    )
    bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip()
    return f"{bindir}/{name}"


def all_stats(c) -> list:
    return [
        c.execute(
            f"SELECT coalesce(string_agg(x::text, ',' ORDER BY x::text), '') FROM rag.{t} AS x"
        ).fetchone()[0]
        for t in ("tenant_stat", "tenant_lexeme", "tenant_title", "word", "chunk_tsv")
    ]


def test_a_data_only_move_between_install_kinds_keeps_the_statistics(pg, tmp_path):
    """docs/managed.md: a data-only dump moves the data between `pgcite install` and the extension. 0.5.0's
    derived tables are dumped with a plain schema, and restoring their rows beside the chunks (whose COPY the
    statement trigger counts) failed on their primary keys: the documented command, restored in one
    transaction, failed as a whole. The documented command now leaves them out (and the two bookkeeping tables
    the extension lacks); the target's trigger counts the chunks, and the statistics are the source's."""
    from pgcite.cli import main

    src, dst = f"pgcite_move_src_{SFX}", f"pgcite_move_dst_{SFX}"
    for name in (src, dst):
        drop_database(pg, name)
        with pg.admin() as a:
            a.execute(f'CREATE DATABASE "{name}"')
    params = psycopg.conninfo.conninfo_to_dict(pg.dsn(src))
    env = {**os.environ, "PGHOST": str(params["host"]), "PGPORT": str(params["port"]), "PGUSER": "postgres"}
    try:
        with pg.admin(src) as c:
            for ext in ("vector", "pg_trgm", "fuzzystrmatch"):
                c.execute(f"CREATE EXTENSION {ext}")
        assert main(["install", "--dsn", pg.dsn(src)], out=io.StringIO(), err=io.StringIO()) == 0
        e1, e2 = [1.0] + [0.0] * 383, [0.0, 1.0] + [0.0] * 382
        items = [
            {
                "content": "Autovacuum removes dead tuples in the background.",
                "embedding": e1,
                "title": "1.1. Vacuum",
            },
            {
                "content": "A B-tree index handles equality and range queries.",
                "embedding": e2,
                "title": "Indexes",
            },
        ]
        with pg.admin(src) as c:
            c.execute("SELECT rag.create_tenant('m')")
            c.execute("SELECT * FROM rag.store_document('m', 'doc', %s)", (json.dumps(items),))
            c.execute("SELECT * FROM rag.store_document('m', 'gone', %s)", (json.dumps(items[:1]),))
            c.execute("SELECT rag.delete_document('m', 'gone')")
            expected = all_stats(c)
        assert expected[0] == "(m,2)"
        dump = tmp_path / "data.sql"
        # the command of docs/managed.md "`pgcite install` and the extension"
        subprocess.run(
            [
                pg_bin("pg_dump"),
                "--data-only",
                "-n",
                "rag",
                "--exclude-table=rag.install_version",
                "--exclude-table=rag.install_migration",
                "--exclude-table-data=rag.tenant_stat",
                "--exclude-table-data=rag.tenant_lexeme",
                "--exclude-table-data=rag.tenant_title",
                "--exclude-table-data=rag.word",
                "--exclude-table-data=rag.chunk_tsv",
                "-d",
                src,
                "-f",
                str(dump),
            ],
            check=True,
            env=env,
        )
        with pg.admin(dst) as c:
            c.execute("CREATE EXTENSION pgcite CASCADE")
        subprocess.run(
            [pg_bin("psql"), "-q", "-1", "-v", "ON_ERROR_STOP=1", "-d", dst, "-f", str(dump)],
            check=True,
            env=env,
            capture_output=True,
        )
        with pg.admin(dst) as c:
            assert all_stats(c) == expected
            c.execute("SELECT rag._rebuild_retrieval_stats()")
            assert all_stats(c) == expected
            status, citations = c.execute(
                "SELECT status, citations FROM rag.ask('Which index handles range queries?', 'm', 2,"
                " %s::vector)",
                ("[" + ",".join(map(str, e2)) + "]",),
            ).fetchone()
            assert status == "answered" and citations[0]["verified"] is True
    finally:
        for name in (src, dst):
            drop_database(pg, name)


# ---------------------------------------------------------------- upgrades a tenant role could hold up
@pytest.mark.parametrize("kind", ["extension", "pgcite install"])
def test_a_readers_view_on_a_removed_function_does_not_block_the_upgrade(pg, kind):
    """0.5.0 drops rag.explain(text, text, integer) (migrations/009). A reader may create a view over any
    function it can name: a temporary one in any database (TEMP is PUBLIC's), a permanent one in a schema of
    its own. Such a view held up ALTER EXTENSION pgcite UPDATE and `pgcite install` ("cannot drop function
    rag.explain(text,text,integer) because other objects depend on it") for as long as it existed: an upgrade
    that a tenant role could prevent. The migration drops with CASCADE; the reader's view goes with it."""
    from pgcite.cli import main

    name, reader = f"pgcite_up_{SFX}", f"upreader_{SFX}"
    drop_database(pg, name)
    with pg.admin() as a:
        a.execute(f'CREATE DATABASE "{name}"')
        a.execute(f"CREATE ROLE {reader} LOGIN")
    try:
        with pg.admin(name) as c:
            if kind == "extension":
                c.execute("CREATE EXTENSION pgcite VERSION '0.4.0' CASCADE")
            else:
                for ext in ("vector", "pg_trgm", "fuzzystrmatch"):
                    c.execute(f"CREATE EXTENSION {ext}")
                rc = main(
                    ["install", "--dsn", pg.dsn(name), "--version", "0.4.0"],
                    out=io.StringIO(),
                    err=io.StringIO(),
                )
                assert rc == 0
            c.execute(f"GRANT pgcite_reader TO {reader}")
            c.execute("SELECT rag.create_tenant('alpha')")
            c.execute("SELECT rag.grant_tenant('alpha', %s)", (reader,))
        with connect(pg, name, reader) as r:
            r.execute("CREATE TEMP VIEW held AS SELECT * FROM rag.explain('vacuum', 'alpha', 5)")
            with pg.admin(name) as c:
                if kind == "extension":
                    c.execute("ALTER EXTENSION pgcite UPDATE")
                    version = c.execute(
                        "SELECT extversion FROM pg_extension WHERE extname = 'pgcite'"
                    ).fetchone()[0]
                else:
                    err = io.StringIO()
                    assert main(["install", "--dsn", pg.dsn(name)], out=io.StringIO(), err=err) == 0, (
                        err.getvalue()
                    )
                    version = c.execute(
                        "SELECT version FROM rag.install_version ORDER BY id DESC LIMIT 1"
                    ).fetchone()[0]
                assert version == CURRENT  # the repository's version, past 0.5.0 (which dropped the function)
            assert fails(r, "SELECT * FROM held") == "42P01"  # dropped with the old function
            assert r.execute(
                "SELECT to_regprocedure('rag.explain(text, text, integer, public.vector)')"
            ).fetchone()[0]
    finally:
        drop_database(pg, name)
        with pg.admin() as a:
            a.execute(f"DROP ROLE IF EXISTS {reader}")


# ---------------------------------------------------------------- round 4: rag.word, shared by every tenant
def test_another_tenants_open_ingest_does_not_hold_up_an_ingest(pg, adb):
    """rag.word (migrations/008) holds each word of every tenant once, kept by a statement trigger on rag.term
    With a unique key on the word, an ingest adding a word new to rag.word held that key until its transaction
    ended: another tenant's ingest of a document with the same new word waited for it (and two such
    transactions of several documents each could deadlock, one of them failing). A writer of one tenant that
    ingested a list of words and left its transaction open thus stopped the other tenants' ingests. rag.term's
    key holds the tenant, so it never made tenants wait on each other; rag.word must not either."""
    word = "zorbquintal" + "".join(chr(ord("a") + int(ch, 16) % 26) for ch in SFX)
    doc = f"# Round four\n\nThe {word} gauge is checked every morning.\n"
    with connect(pg, adb, R["writer"]) as a, connect(pg, adb, R["bravo"]) as b:
        a.execute("BEGIN")
        a.execute("SELECT * FROM rag.ingest('alpha', 'hold.md', %s)", (doc,))
        # tenant alpha's transaction stays open; bravo's ingest of the same new word must not wait for it
        b.execute("SET lock_timeout = '3s'")
        b.execute("SELECT * FROM rag.ingest('bravo', 'same.md', %s)", (doc,))
        a.execute("COMMIT")
    with connect(pg, adb, R["bravo"]) as b, pg.admin(adb) as c:
        # each tenant's correction finds the word, once it is its own
        assert (
            b.execute("SELECT rag.correct_question(%s, 'bravo')", (word[:5] + word[6:],)).fetchone()[0]
            == word
        )
        assert c.execute("SELECT count(*) FROM rag.word WHERE word = %s", (word,)).fetchone()[0] >= 1
        b.execute("SELECT * FROM rag.delete_document('bravo', 'same.md')")
    with pg.admin(adb) as c:
        c.execute("SELECT * FROM rag.delete_document('alpha', 'hold.md')")


# ---------------------------------------------------------------- round 4: question forms of the gate, quotes
@pytest.mark.parametrize(
    "call",
    [
        "SELECT rag._defined_term('english', %s) IS NULL",
        "SELECT rag._question_features(%s) -> 'defines' = 'null'",
    ],
)
def test_definition_question_forms_cost_little_for_any_length(pg, adb, call):
    """rag._defined_term (0.5.0 round 3, the gate's term of "What is a hash map?") and the 'defines' form of
    rag._question_features match "what is X" with a lazy term before an optional tail: PostgreSQL's regular
    expressions took time quadratic in the length of a question with no comma or question mark (4,000
    characters: 33 ms, 40,000: 1.8 s, 400,000: 175 s). Both were internal functions a writer may run as
    itself, with text of any length (rag._question_features is pgcite_owner's since session 20). The term
    ends at the first comma or question mark and is at most four (five) words: only the text up to there is
    matched, and only when it is at most 200 characters."""
    # (rag._question_features is pgcite_owner's since session 20: only rag._answer calls it)
    with pg.admin(adb) if "_question_features" in call else connect(pg, adb, R["writer"]) as w:
        w.execute("SET statement_timeout = '5s'")
        for text in ("what is " + "a" * 400000, "What is the " + "hash map " * 40000 + "?"):
            assert w.execute(call, (text,)).fetchone()[0] is True
        # a definition question still has its term, whatever follows its comma or question mark
        for q in ("What is a hash map?", "What is a hash map, and when " + "is it used " * 30000 + "?"):
            assert w.execute(call, (q,)).fetchone()[0] is False
            if "_defined_term" in call:
                assert w.execute("SELECT rag._defined_term('english', %s)::text", (q,)).fetchone()[0] == (
                    "'hash' <-> 'map'"
                )
