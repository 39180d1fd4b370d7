"""Security round 5 (0.6.0): attacks as a hostile tenant role (docs/BENCHMARKS.md "Security round 5").

First the hole round 3 left: PL/Python converts an array or text argument into Python objects before the
function's first line runs (8 bytes per element, a copy of every text, not cancellable), so a size check
inside the Python came too late. Every PL/Python function a tenant role may run now takes no argument; the
ones that take texts are pgcite_owner's only and reached through SECURITY DEFINER PL/pgSQL functions that
check the sizes first. Then cross-tenant interference, leaks and CPU or memory bombs. Each test logs in as an
ordinary role, tries one attack and asserts the safe outcome. The backend's peak memory is read from /proc
(the tests start the server on this machine; with PGCITE_TEST_DSN those checks skip). The span limit runs
in pgcite_udfs: run where the database's venv holds this checkout's (make setup, or PGCITE_DB_VENV)."""

from __future__ import annotations

import json
import os
import random
import re
import uuid
from pathlib import Path

import psycopg
import pytest
from conftest import ALPHA_DOC, connect, fails, sqlstate_of, two_tenant_database

ROOT = Path(__file__).resolve().parents[1]
SFX = uuid.uuid4().hex[:6]
R = {k: f"{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
TENANT_ROLES = ("pgcite_reader", "pgcite_writer", "pgcite_admin", "pg_database_owner")


@pytest.fixture(scope="module")
def adb(pg):
    yield from two_tenant_database(pg, f"pgcite_attack060_{SFX}", R)


def new_checkout_python(c) -> None:
    """Skips unless the database runs this checkout's pgcite_udfs (the span limit is in the Python)."""
    site = c.execute("SELECT rag.python_info()").fetchone()[0]["site_packages"]
    runs = Path(site) / "pgcite_udfs" / "udf.py"
    if (
        not runs.exists()
        or runs.read_bytes() != (ROOT / "python_udfs" / "pgcite_udfs" / "udf.py").read_bytes()
    ):
        pytest.skip(f"the database runs another pgcite_udfs ({runs}) than this checkout's: run make setup")


def peak_mb(c) -> int | None:
    """The backend's peak resident memory (VmHWM) in MB, when the server runs on this machine."""
    if os.environ.get("PGCITE_TEST_DSN"):
        return None
    pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


# ---------------------------------------------------------------- PL/Python's arguments (round 3's hole)
def test_no_plpython_function_a_tenant_role_may_run_takes_an_argument(pg, adb):
    """PL/Python builds its arguments before the function's first line runs, so a check inside cannot bound
    them. Catalog check: every PL/Python function in rag that a tenant role (reader, writer, admin, the
    database's owner) or PUBLIC may execute takes no argument; the others are pgcite_owner's only."""
    with pg.admin(adb) as a:
        rows = a.execute(
            "SELECT p.oid::regprocedure::text, p.pronargs, r.rolname"
            " FROM pg_proc AS p CROSS JOIN (VALUES ('pgcite_reader'), ('pgcite_writer'), ('pgcite_admin'),"
            " ('pg_database_owner'), ('public')) AS r (rolname)"
            " WHERE p.pronamespace = 'rag'::regnamespace"
            " AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpython3u')"
            " AND has_function_privilege(r.rolname, p.oid, 'EXECUTE')"
        ).fetchall()
        n_python = a.execute(
            "SELECT count(*) FROM pg_proc WHERE pronamespace = 'rag'::regnamespace"
            " AND prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpython3u')"
        ).fetchone()[0]
    assert n_python >= 10
    assert rows, "some PL/Python function should be reachable (rag.python_info)"
    assert [(sig, role) for sig, nargs, role in rows if nargs > 0] == []


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM rag._embed_texts(ARRAY['x'])",
        "SELECT rag._parse('# x', 'markdown', 256, 32)",
        "SELECT count(*) FROM rag._split_sentences(ARRAY['x'], 10)",
        "SELECT rag._sentence_vectors('[]')",
        "SELECT rag._support_similarity('[]')",
        "SELECT rag._common_words(ARRAY['x'])",
        "SELECT rag._generator_call('g', '{}')",
    ],
)
def test_plpython_functions_with_arguments_are_pgcite_owners_only(pg, adb, sql):
    for role in ("reader", "writer", "admin"):
        with connect(pg, adb, R[role]) as c:
            assert fails(c, sql) == "42501"


def test_embed_many_refuses_the_largest_array_before_python_builds_it(pg, adb):
    """rag.embed_many of PostgreSQL's largest array, 134 million NULLs (16 MB), held 1.1 GB for 1.7-2.8 s
    before the Python's check refused it (round 3 left this). rag.embed_many now checks the array's measures
    in PL/pgSQL (rag._embed_checked, SECURITY DEFINER) before rag._embed_texts (PL/Python, pgcite_owner only)
    sees it: 54000, and the backend never holds the Python list."""
    with connect(pg, adb, R["reader"]) as c:
        before = peak_mb(c)
        sql = "SELECT count(*) FROM rag.embed_many(array_fill(NULL::text, ARRAY[134217727]))"
        assert fails(c, sql) == "54000"
        after = peak_mb(c)
        if before is not None and after is not None:
            # array_fill's 16 MB bitmap and its copies; the Python list was 1,024 MB
            assert after - before < 200, (before, after)
        # far over max_document_bytes in bytes: refused from the array's size alone (one 60 MB text)
        assert fails(c, "SELECT count(*) FROM rag.embed_many(ARRAY[repeat('x', 60000000)])") == "54000"
        assert fails(c, "SELECT rag.embed(repeat('x', 60000000))") == "54000"
        # arrays of arrays never reach the model (PL/Python made lists of lists of them)
        assert fails(c, "SELECT count(*) FROM rag.embed_many(ARRAY[['a', 'b'], ['c', 'd']])") == "22023"
        # normal input still works: NULL in, NULL out; positions kept
        rows = c.execute(
            "SELECT ord, embedding IS NULL, vector_dims(embedding) FROM rag.embed_many(ARRAY['a', NULL, 'b'])"
            " ORDER BY 1"
        ).fetchall()
        assert rows == [(1, False, 384), (2, True, None), (3, False, 384)]
        one, many = c.execute(
            "SELECT rag.embed('How do I vacuum?')::text,"
            " (SELECT embedding::text FROM rag.embed_many(ARRAY['How do I vacuum?']))"
        ).fetchone()
        assert one == many
        assert c.execute("SELECT rag.embed(NULL) IS NULL").fetchone()[0]


def test_embed_limits_follow_max_document_bytes_exactly(pg, adb):
    """The byte limit is exact where the array's size alone does not settle it: texts of max_document_bytes
    in all pass, one byte more is 54000 (the setting is an admin's)."""
    with pg.admin(adb) as a:
        a.execute("SELECT rag.set_config('max_document_bytes', '6400')")
    try:
        with connect(pg, adb, R["reader"]) as c:
            # 100 texts allowed (one per 64 bytes); 64 bytes each = 6,400 bytes: passes
            n = c.execute(
                "SELECT count(*) FROM rag.embed_many(array_fill(repeat('y', 64), ARRAY[100]))"
            ).fetchone()
            assert n[0] == 100
            assert (
                fails(c, "SELECT count(*) FROM rag.embed_many(array_fill('y'::text, ARRAY[101]))") == "54000"
            )
            sql = (
                "SELECT count(*) FROM rag.embed_many("
                "array_append(array_fill(repeat('y', 64), ARRAY[99]), %s))"
            )
            assert c.execute(sql, ("y" * 64,)).fetchone()[0] == 100
            assert fails(c, sql, ("y" * 65,)) == "54000"
            assert fails(c, "SELECT rag.embed(repeat('y', 6401))") == "54000"
    finally:
        with pg.admin(adb) as a:
            a.execute("SELECT rag.set_config('max_document_bytes', NULL)")


def test_the_parser_and_the_sentence_splitter_check_their_input_first(pg, adb):
    """A writer reached rag._parse (PL/Python) with any body and rag._sentence_spans (PL/Python) with any
    array: 134 million NULLs held 1.1 GB for 10.6 s with no check at all, and one text of 16 MB of short
    sentences held 950 MB of spans. Now rag._parsed and rag._sentence_spans are SECURITY DEFINER PL/pgSQL that
    check the body or the array first, and the splitter stops at the spans a document may store."""
    with connect(pg, adb, R["writer"]) as c:
        new_checkout_python(c)
        before = peak_mb(c)
        sql = "SELECT count(*) FROM rag._sentence_spans(array_fill(NULL::text, ARRAY[134217727]))"
        assert fails(c, sql) == "54000"
        after = peak_mb(c)
        if before is not None and after is not None:
            assert after - before < 200, (before, after)
        assert fails(c, "SELECT count(*) FROM rag._sentence_spans(ARRAY[repeat('Ab. ', 4000000)])") == "54000"
        assert fails(c, "SELECT rag._parsed(repeat('x', 30000000), 'text', 256, 32)") == "54000"
        assert fails(c, "SELECT rag._parsed('some text', 'text', 100000, 32)") == "22023"
        assert fails(c, "SELECT * FROM rag.chunk_text(repeat('x ', 15000000))") == "54000"
        # normal input
        spans = c.execute("SELECT * FROM rag._sentence_spans(ARRAY['One. Two.', NULL, 'Three.'])").fetchall()
        assert spans == [(1, 0, 4), (1, 5, 9), (3, 0, 6)]
        chunks = c.execute("SELECT count(*) FROM rag.chunk_markdown(%s)", (ALPHA_DOC,)).fetchone()[0]
        assert chunks == 2
        row = c.execute(
            "SELECT status, chunks FROM rag.ingest('alpha', 'p.md', %s)", (ALPHA_DOC + "\nMore.\n",)
        )
        assert row.fetchone() == ("inserted", 2)
    with connect(pg, adb, R["reader"]) as c:
        assert fails(c, "SELECT rag._parsed('# x', 'markdown', 256, 32)") == "42501"
        assert fails(c, "SELECT * FROM rag._sentence_spans(ARRAY['a'])") == "42501"
    with connect(pg, adb, R["nobody"]) as c:
        assert fails(c, "SELECT rag.embed('x')") == "42501"


# ---------------------------------------------------------------- CPU bombs
def test_sql_sentence_spans_take_time_linear_in_the_text(pg, adb):
    """rag._text_spans (the core's sentence splitter: quotes of passages without stored sentences when
    pgcite_python is absent, so for every ask that retrieves such a chunk) ran a regexp_instr over the rest
    of the unit for every sentence end, cut every unit out of the text with substr at a character offset
    and appended units with array_cat: 20,000 characters of short sentences took 1.7 s, 200,000 more than
    30 s; 20,000 one-line headings of 200,000 characters 54 s. A writer's chunk of that kind made every ask
    retrieving it that slow. Now one regexp_matches pass per unit and byte offsets: 400,000 characters in
    well under a second (the bound below is 20 s; before, about 10 minutes)."""
    hostile = {
        "sentences": 'A. b, (c)? "d" [1] e.g. ',
        "headings": "# Heading\n",
        "paragraphs": "line \u00dcn\u00ef. Zed\nmore. Text\n\n",
    }
    with connect(pg, adb, R["writer"]) as c:
        c.execute("SET statement_timeout = '20s'")
        for unit in hostile.values():
            text = (unit * (400000 // len(unit) + 1))[:400000]
            n = c.execute("SELECT count(*) FROM rag._text_spans(%s)", (text,)).fetchone()[0]
            assert n > 10000
        # the spans themselves are unchanged: exact offsets of trimmed sentences and units
        text = "Intro here. Second one:\n\n- item one. More\n- two\n\n# Head\n\n1. First step.\n2. Next."
        spans = c.execute("SELECT start_pos, end_pos FROM rag._text_spans(%s)", (text,)).fetchall()
        assert [text[s:e] for s, e in spans] == [
            "Intro here.",
            "Second one:",
            "- item one.",
            "More",
            "- two",
            "# Head",
            "1. First step.",
            "2. Next.",
        ]


# ---------------------------------------------------------------- storage bombs
def test_rag_answer_stores_no_unbounded_reply_in_the_log(pg, adb):
    """rag.answer keeps the caller's reply, generator name and error in rag.context and then in the
    append-only log. A reply over the checks' 262,144 bytes was "invalid output" but stored raw: a reader's
    two replies of 35 MB with a 1 MB generator name and error added 144 MB to the log for good. Now 54000
    before anything is read or written; the context can still be answered."""
    with connect(pg, adb, R["reader"]) as c:
        status, ctx = c.execute(
            "SELECT status, context_id FROM rag.context('How often does the alpha team vacuum?', 'alpha')"
        ).fetchone()
        assert status == "ready"
        logged = c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0]
        big = '{"answer": "x", "citations": [], "pad": "' + "ab" * 140000 + '"}'
        sql = "SELECT status FROM rag.answer(%s, %s::jsonb, %s, %s)"
        assert fails(c, sql, (ctx, big, None, None)) == "54000"
        assert fails(c, sql, (ctx, '{"answer": "x"}', "g" * 201, None)) == "54000"
        assert fails(c, sql, (ctx, None, None, "e" * 4001)) == "54000"
        assert c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0] == logged
        assert c.execute(
            "SELECT attempts, ask_id FROM rag.context WHERE context_id = %s", (ctx,)
        ).fetchone() == ([], None)
        # a reply within the limits is checked as before: invalid output, one retry, then abstained
        assert c.execute(sql, (ctx, '{"answer": "x"}', "mine", None)).fetchone()[0] == "retry"
        assert c.execute(sql, (ctx, None, "mine", "timed out")).fetchone()[0] == "abstained"
        assert c.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0] == logged + 1


# ---------------------------------------------------------------- cross-tenant interference
def _serializable_pair(pg, adb, first, second):
    """Runs two calls in two SERIALIZABLE transactions of two roles, both before either commits; returns
    each transaction's outcome at commit ("ok" or its SQLSTATE)."""
    dsn = pg.dsn(adb)
    conns = [psycopg.connect(psycopg.conninfo.make_conninfo(dsn, user=R[r])) for r, _ in (first, second)]
    try:
        for c in conns:
            c.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        for c, (_, sql) in zip(conns, (first, second), strict=True):
            c.execute(sql).fetchall()
        out = []
        for c in conns:
            try:
                c.commit()
                out.append("ok")
            except psycopg.Error as e:
                out.append(e.sqlstate)
        return out
    finally:
        for c in conns:
            c.close()


def test_serializable_asks_do_not_fail_because_of_another_tenants_transactions(pg, adb):
    """Under SERIALIZABLE every tenant shares rag's tables and index pages, so PostgreSQL's predicate locks
    can tie one tenant's transaction to another's. An ask of alpha's reader, in either order with bravo's
    ingest, delete, ask or log check (each in its own SERIALIZABLE transaction, both open at once), commits:
    it reads only its tenant's rows and writes only its own log entry. (Two tenants' concurrent SERIALIZABLE
    ingests can fail one with 40001: docs/security.md, a known limit.)"""
    ask_a = ("reader", "SELECT status FROM rag.ask('How often does the alpha team vacuum?', 'alpha')")
    ingest = "SELECT status FROM rag.ingest('bravo', %s, '# Ser\n\nZorbix {n} quandle flomp.\n')"
    with pg.admin(adb) as a:
        a.execute("SELECT rag.grant_tenant('bravo', %s)", (R["nobody"],))
        a.execute(f"GRANT pgcite_reader TO {R['nobody']}")
    try:
        for n in range(8):
            key = f"ser-{n}.md"
            others = [
                ("bravo", ingest.format(n=n).replace("%s", f"'{key}'")),
                ("bravo", f"SELECT rag.delete_document('bravo', '{key}')"),
                ("nobody", "SELECT status FROM rag.ask('What is the launch code?', 'bravo')"),
                ("nobody", "SELECT ok FROM rag.verify_log('bravo')"),
            ]
            other = others[n % 4]
            if "delete" in other[1]:  # a document to delete
                with pg.admin(adb) as a:
                    a.execute(ingest.format(n=n), (key,))
            pair = (ask_a, other) if n < 4 else (other, ask_a)
            assert _serializable_pair(pg, adb, *pair) == ["ok", "ok"], pair
    finally:
        with pg.admin(adb) as a:
            a.execute(f"REVOKE pgcite_reader FROM {R['nobody']}")
            a.execute("SELECT rag.revoke_tenant('bravo', %s)", (R["nobody"],))


def test_an_open_transaction_of_one_tenant_holds_up_no_other_tenant(pg, adb):
    """alpha's writer ingests a document, retires another and asks, and leaves the transaction open: bravo's
    ingest, delete, ask and log check, and an admin's tenant, membership, setting and calibration calls for
    bravo, all finish without waiting (lock_timeout 3 s each)."""
    with psycopg.connect(psycopg.conninfo.make_conninfo(pg.dsn(adb), user=R["writer"])) as a:
        a.execute("SELECT * FROM rag.ingest('alpha', 'open.md', '# Open\n\nZorbix quandle flomp here.\n')")
        a.execute("SELECT * FROM rag.ingest('alpha', 'gone.md', '# Gone\n\nSoon retired words.\n')")
        a.execute("SELECT rag.delete_document('alpha', 'gone.md')")
        a.execute("SELECT status FROM rag.ask('How often does the alpha team vacuum?', 'alpha')")
        calls = [
            (
                "bravo",
                "SELECT status FROM rag.ingest('bravo', 'open.md', '# Open\n\nZorbix quandle flomp here.\n')",
            ),
            ("bravo", "SELECT rag.delete_document('bravo', 'open.md')"),
            ("admin", "SELECT rag.create_tenant('opentx')"),
            ("admin", f"SELECT rag.grant_tenant('bravo', '{R['admin']}')"),
            ("admin", "SELECT status FROM rag.ask('What is the launch code?', 'bravo')"),
            ("admin", "SELECT ok FROM rag.verify_log('bravo')"),
            ("admin", f"SELECT rag.revoke_tenant('bravo', '{R['admin']}')"),
            ("admin", "SELECT rag.set_config('min_score', '0.5')"),
            ("admin", "SELECT rag.set_config('min_score', NULL)"),
            (
                "admin",
                'SELECT count(*) FROM rag.calibrate(\'bravo\', \'[{"question": "What is the launch code?",'
                ' "kind": "answerable"}, {"question": "Weather in Paris?", "kind": "out_of_corpus"}]\')',
            ),
        ]
        try:
            for role, sql in calls:
                with connect(pg, adb, R[role]) as b:
                    b.execute("SET lock_timeout = '3s'")
                    b.execute(sql).fetchall()
        finally:
            a.rollback()
            with pg.admin(adb) as s:
                s.execute("UPDATE rag.tenant SET gate = '{}' WHERE tenant = 'bravo'")


def test_what_citations_repeat_is_bounded_per_field(pg, adb):
    """A citation carries its chunk's title and anchor and its document's source URL, into the answer, the
    generation prompt and the append-only log of every ask that cites it. A writer's 5 MB source URL (within
    max_document_bytes) made each such ask return and log 5 MB. Now a source URL over 8,192 characters, a
    chunk title or anchor over 4,096 or a section path over 8,192 is 54000, and nothing is stored."""
    doc = "# Vacuum schedule\n\nThe alpha team vacuums its tables every night at two o'clock.\n"
    vec = [0.05] * 384
    with connect(pg, adb, R["writer"]) as c:
        docs = c.execute("SELECT count(*) FROM rag.document").fetchone()[0]
        sql = "SELECT * FROM rag.ingest('alpha', 'long-url.md', %s, source_url => %s)"
        assert fails(c, sql, (doc, "https://example.org/" + "u" * 9000)) == "54000"
        items = [{"title": "T" * 5000, "content": "Vacuum runs at night.", "embedding": vec}]
        sql = "SELECT * FROM rag.store_document('alpha', 'long-title.md', %s::jsonb)"
        assert fails(c, sql, (json.dumps(items),)) == "54000"
        assert c.execute("SELECT count(*) FROM rag.document").fetchone()[0] == docs
        # long but reasonable values are stored as before
        url = "https://example.org/" + "u" * 2000
        row = c.execute(
            "SELECT status FROM rag.ingest('alpha', 'long-url.md', %s, source_url => %s)", (doc, url)
        )
        assert row.fetchone()[0] == "inserted"
        items[0]["title"] = "T" * 600
        assert c.execute(sql, (json.dumps(items),)).fetchone()[2] == "inserted"
        # a title is a key of two B-tree indexes (at most 2,704 bytes an entry): over 2,400 bytes is 54000
        # with the limit named, not the index's error (2,600 random letters did not compress and failed there)
        rnd = random.Random(6)
        for title in ("".join(rnd.choices("abcdefghijklmnopqrstuvwxyz ", k=2600)), "é" * 1201):
            items[0]["title"] = title
            with pytest.raises(psycopg.Error) as e:
                c.execute(sql.replace("long-title", "longer-title"), (json.dumps(items),))
            assert sqlstate_of(e) == "54000" and "chunk title over 2400 bytes" in str(e.value), str(e.value)
        items[0]["title"] = "é" * 1200  # 2,400 bytes
        assert (
            c.execute(sql.replace("long-title", "longer-title"), (json.dumps(items),)).fetchone()[2]
            == "inserted"
        )


# ---------------------------------------------------------- security round 6 (the round-5 title indexes)

TITLES_DOC = "\n\n".join(
    f"# Checkpoint tuning part {i}\n\nThe checkpoint of part {i} writes dirty pages of the {i} buffers."
    for i in range(12)
)


def _title_rows(c, tenant: str, questions) -> list:
    sql = "SELECT chunk_id, rank, trgm_score, fts_score, distance, fused_score FROM rag.retrieve(%s, %s, 8)"
    return [c.execute(sql, (q, tenant)).fetchall() for q in questions]


def test_index_names_of_near_identical_tenants_stay_apart(pg, adb):
    """Attack that held (security round 6): tenant names that differ only in their 63rd byte, or only in
    case, would share an index name if the name were the tenant truncated to 63 bytes or folded. Each gets
    its own three indexes (rag._index_tenants), whose predicates name exactly that tenant, and each tenant's
    reader retrieves only its own chunks, title scores included, past PL/pgSQL's five-call plan caching."""
    stem = "t6" + "x" * 60
    tenants = (stem + "a", stem + "b", "T6case", "t6case")
    assert all(len(t) <= 63 for t in tenants)
    role = f"t6reader_{SFX}"
    questions = ("Checkpoint tuning part 3", "dirty pages of the buffers")
    with pg.admin(adb) as a:
        for t in tenants:
            a.execute("SELECT rag.create_tenant(%s)", (t,))
            a.execute("SELECT * FROM rag.ingest(%s, 'c.md', %s)", (t, TITLES_DOC))
        a.execute(f"CREATE ROLE {role} LOGIN IN ROLE pgcite_reader")
        for t in tenants:
            a.execute("SELECT rag.grant_tenant(%s, %s)", (t, role))
    try:
        with connect(pg, adb, role) as c:
            before = {t: _title_rows(c, t, questions) for t in tenants}
        with pg.admin(adb) as a:
            built = a.execute(
                "SELECT i.tenant, i.index_name FROM rag.tenant AS t "
                "CROSS JOIN LATERAL rag._index_tenants(1, t.tenant) AS i WHERE t.tenant = ANY(%s)",
                (list(tenants),),
            ).fetchall()
            assert len(built) == 3 * len(tenants)
            assert len({n for _, n in built}) == len(built)  # twelve distinct names
            for t, name in built:
                pred = a.execute(
                    "SELECT pg_get_expr(x.indpred, x.indrelid) FROM pg_index AS x"
                    " WHERE x.indexrelid = %s::regclass",
                    (f"rag.{name}",),
                ).fetchone()[0]
                assert f"tenant = '{t}'::text" in pred, (t, name, pred)
        with connect(pg, adb, role) as c:
            for _ in range(7):
                for t in tenants:
                    rows = _title_rows(c, t, questions)
                    assert rows == before[t], t
                    ids = [r[0] for q in rows for r in q]
                    owners = c.execute(
                        "SELECT DISTINCT tenant FROM rag.chunk WHERE chunk_id = ANY(%s)", (ids,)
                    ).fetchall()
                    assert owners == [(t,)], t
                    assert any(r[2] is not None for q in rows for r in q), t  # the title leg contributes
    finally:
        with pg.admin(adb) as a:
            for t in tenants:
                for fn in ("_tenant_index_name", "_tenant_fts_index_name", "_tenant_title_index_name"):
                    name = a.execute(f"SELECT rag.{fn}(%s)", (t,)).fetchone()[0]
                    a.execute(f'DROP INDEX IF EXISTS rag."{name}"')
                a.execute("SELECT rag.revoke_tenant(%s, %s)", (t, role))
            a.execute(f"DROP ROLE IF EXISTS {role}")


def test_another_tenants_writer_cannot_steer_or_reach_a_tenants_title_leg(pg, adb):
    """Attack that held (security round 6): bravo's writer stores hundreds of titles that copy alpha's and
    hold every word of alpha's questions, so that the table-wide title index (rag.tenant_title_tsv_idx) is
    full of bravo's rows. alpha's answers do not change, and alpha's title leg never reads that index: a small
    tenant reads its titles by primary key, and once a DBA built alpha's own title index, through it. No
    tenant role (reader, writer, admin of the tenant) may build, drop or squat a title index (42501), or run
    the legs' function rag._candidates past its first statement (42501; another tenant is one that does not
    exist, 42704)."""
    qs = ("Checkpoint tuning part 3", "dirty pages of the buffers part 7")
    tenant, other = f"t6a_{SFX}", f"t6b_{SFX}"
    with pg.admin(adb) as a:
        for t in (tenant, other):
            a.execute("SELECT rag.create_tenant(%s)", (t,))
        a.execute("SELECT * FROM rag.ingest(%s, 'c.md', %s)", (tenant, TITLES_DOC))
        a.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, R["reader"]))
        a.execute("SELECT rag.grant_tenant(%s, %s)", (other, R["bravo"]))
        a.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, R["admin"]))
    own = None
    try:
        with connect(pg, adb, R["reader"]) as c:
            before = _title_rows(c, tenant, qs)
        assert any(r[2] is not None for q in before for r in q)
        flood = "\n\n".join(
            f"# Checkpoint tuning part {i % 12} dirty pages buffers {i}\n\nFiller {i} of another tenant."
            for i in range(400)
        )
        with connect(pg, adb, R["bravo"]) as w:
            w.execute("SELECT * FROM rag.ingest(%s, 'flood.md', %s)", (other, flood))
            w.execute("SELECT * FROM rag.ingest(%s, 'copy.md', %s)", (other, TITLES_DOC))
        with pg.admin(adb) as a:
            a.execute("ANALYZE rag.tenant_title")
            copied = a.execute(
                "SELECT count(*) FROM rag.tenant_title"
                " WHERE tenant = %s AND tsv @@ to_tsquery('english', 'checkpoint')",
                (other,),
            ).fetchone()[0]
            assert copied >= 400
            own = a.execute("SELECT rag._tenant_title_index_name(%s)", (tenant,)).fetchone()[0]
        with connect(pg, adb, R["reader"]) as c:
            for _ in range(7):
                assert _title_rows(c, tenant, qs) == before

        def title_scans() -> list[str]:
            seen: list[str] = []
            with pg.admin(adb) as a:
                a.add_notice_handler(lambda d: seen.append(d.message_primary or ""))
                with a.transaction():
                    a.execute("LOAD 'auto_explain'")
                    for s in (
                        "auto_explain.log_min_duration = 0",
                        "auto_explain.log_nested_statements = on",
                        "auto_explain.log_analyze = on",
                        "auto_explain.log_level = notice",
                        "client_min_messages = notice",
                    ):
                        a.execute(f"SET LOCAL {s}")
                    a.execute(f"SET LOCAL ROLE {R['reader']}")
                    assert _title_rows(a, tenant, qs) == before
            # the scans of rag.tenant_title that ran (a branch pruned by the custom plan never executes)
            return [
                ln
                for p in seen
                for ln in p.splitlines()
                if "on tenant_title" in ln and "never executed" not in ln
            ]

        scans = title_scans()
        assert scans and not any("tenant_title_tsv_idx" in ln for ln in scans), scans
        assert all(int(re.search(r"actual time=\S+ rows=(\d+)", ln)[1]) <= 12 for ln in scans), scans
        for role in ("reader", "bravo", "admin"):
            with connect(pg, adb, R[role]) as c:
                assert (
                    fails(c, f"CREATE INDEX {own} ON rag.tenant_title USING gin (tsv) WHERE tenant = 'x'")
                    == "42501"
                )
                assert fails(c, f"CREATE TABLE rag.{own} ()") == "42501"
                assert fails(c, "DROP INDEX rag.tenant_title_tsv_idx") == "42501"
                assert fails(c, "SELECT * FROM rag._index_tenants(1, %s)", (tenant,)) == "42501"
                # the legs' function itself (SECURITY INVOKER; owner-only since security round 10: it reads
                # the statistics, which no tenant role may): refused to every tenant role, any tenant (42501)
                leg = "SELECT * FROM rag._candidates(%s, %s, NULL, 40, rag._params())"
                for t in (tenant, other, f"none_{SFX}"):
                    assert fails(c, leg, (t, qs[0])) == "42501"
        with pg.admin(adb) as a:
            n = a.execute("SELECT rag._live_chunks(%s)", (tenant,)).fetchone()[0]
            built = [
                r[0] for r in a.execute("SELECT index_name FROM rag._index_tenants(%s, %s)", (n, tenant))
            ]
            assert own in built
        with connect(pg, adb, R["reader"]) as c:
            for _ in range(7):
                assert _title_rows(c, tenant, qs) == before
        scans = title_scans()
        assert scans and not any("tenant_title_tsv_idx" in ln for ln in scans), scans
        assert all(int(re.search(r"actual time=\S+ rows=(\d+)", ln)[1]) <= 12 for ln in scans), scans
    finally:
        with pg.admin(adb) as a:
            for fn in ("_tenant_index_name", "_tenant_fts_index_name", "_tenant_title_index_name"):
                name = a.execute(f"SELECT rag.{fn}(%s)", (tenant,)).fetchone()[0]
                a.execute(f'DROP INDEX IF EXISTS rag."{name}"')
            a.execute("SELECT rag.revoke_tenant(%s, %s)", (tenant, R["reader"]))
            a.execute("SELECT rag.revoke_tenant(%s, %s)", (tenant, R["admin"]))
            a.execute("SELECT rag.revoke_tenant(%s, %s)", (other, R["bravo"]))


def test_the_database_owner_cannot_build_drop_or_squat_a_tenants_indexes(pg, adb):
    """Attack that held (security round 6): the owner of the database administers pgcite there but is not
    pgcite_owner. It may not build a tenant's indexes (rag._index_tenants), create an index or a table of a
    tenant's index name in rag (what rag._candidates tests with to_regclass), drop or rebuild the title
    indexes (42501); the tenant's answers are the same afterwards."""
    dbo = f"t6dbo_{SFX}"
    tenant = f"t6o_{SFX}"
    with pg.admin(adb) as a:
        a.execute("SELECT rag.create_tenant(%s)", (tenant,))
        a.execute("SELECT * FROM rag.ingest(%s, 'c.md', %s)", (tenant, TITLES_DOC))
        a.execute(f"CREATE ROLE {dbo} LOGIN")
        a.execute(f'ALTER DATABASE "{adb}" OWNER TO {dbo}')
        names = a.execute(
            "SELECT rag._tenant_index_name(%s), rag._tenant_fts_index_name(%s),"
            " rag._tenant_title_index_name(%s)",
            (tenant, tenant, tenant),
        ).fetchone()
    try:
        with connect(pg, adb, dbo) as c:
            before = _title_rows(c, tenant, ("Checkpoint tuning part 3",))
            assert any(r[2] is not None for q in before for r in q)
            assert fails(c, "SELECT * FROM rag._index_tenants(1, %s)", (tenant,)) == "42501"
            for name in names:
                assert fails(c, f"CREATE TABLE rag.{name} ()") == "42501"
                assert fails(c, f"CREATE VIEW rag.{name} AS SELECT 1 AS x") == "42501"
            ddl = f"CREATE INDEX {names[2]} ON rag.tenant_title USING gin (tsv) WHERE tenant = '{tenant}'"
            assert fails(c, ddl) == "42501"
            assert fails(c, "DROP INDEX rag.tenant_title_tsv_idx") == "42501"
            assert fails(c, "REINDEX INDEX rag.tenant_title_tsv_idx") == "42501"
            assert fails(c, "ALTER INDEX rag.tenant_title_tsv_idx SET (fastupdate = off)") == "42501"
            assert _title_rows(c, tenant, ("Checkpoint tuning part 3",)) == before
        with pg.admin(adb) as a:
            assert (
                a.execute(
                    "SELECT count(*) FROM pg_class"
                    " WHERE relnamespace = 'rag'::regnamespace AND relname = ANY(%s)",
                    (list(names),),
                ).fetchone()[0]
                == 0
            )
    finally:
        with pg.admin(adb) as a:
            a.execute(f'ALTER DATABASE "{adb}" OWNER TO CURRENT_USER')
            a.execute(f"DROP ROLE IF EXISTS {dbo}")
