"""Retrieval bounded by indexes: the per-tenant statistics the triggers keep, the per-tenant HNSW index."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

import psycopg
import pytest
from conftest import bm25_reference

ROOT = Path(__file__).resolve().parents[1]

Q = "Notes about the checkpoint of subject 7"


def doc(n: int, word: str) -> str:
    return "\n\n".join(
        f"# {word.title()} topic {i}\n\nNotes on subject {i} about the {word} of the tenant, part {i % 3}."
        for i in range(n)
    )


def stats(conn, tenant: str) -> tuple:
    live = conn.execute("SELECT live_chunks FROM rag.tenant_stat WHERE tenant = %s", (tenant,)).fetchone()
    lex = conn.execute(
        "SELECT lexeme, live_chunks FROM rag.tenant_lexeme WHERE tenant = %s AND live_chunks <> 0 ORDER BY 1",
        (tenant,),
    ).fetchall()
    titles = conn.execute(
        "SELECT title, stripped, tsv::text, trgm::text, live_chunks FROM rag.tenant_title "
        "WHERE tenant = %s AND live_chunks <> 0 ORDER BY 1",
        (tenant,),
    ).fetchall()
    return (live[0] if live else 0), lex, titles


def recomputed(conn, tenant: str) -> tuple:
    """The same figures computed from rag.chunk directly."""
    live = conn.execute(
        "SELECT count(*) FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL", (tenant,)
    ).fetchone()[0]
    lex = conn.execute(
        "SELECT x.lexeme, count(*) FROM rag.chunk AS c CROSS JOIN LATERAL unnest(c.tsv) AS x "
        "WHERE c.tenant = %s AND c.retired_at IS NULL GROUP BY 1 ORDER BY 1",
        (tenant,),
    ).fetchall()
    titles = conn.execute(
        "SELECT title, regexp_replace(title, '^[0-9A-Z]*[0-9.]+\\s+', ''), "
        "to_tsvector(ts_config, regexp_replace(title, '^[0-9A-Z]*[0-9.]+\\s+', ''))::text, "
        "show_trgm(regexp_replace(title, '^[0-9A-Z]*[0-9.]+\\s+', ''))::text, count(*) "
        "FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL AND title <> '' "
        "GROUP BY title, ts_config ORDER BY 1",
        (tenant,),
    ).fetchall()
    return live, lex, titles


def test_statistics_follow_ingest_new_version_and_delete(conn):
    conn.execute("SELECT rag.create_tenant('stats')")
    conn.execute("SELECT * FROM rag.ingest('stats', 'a.md', %s)", (doc(6, "vacuum"),))
    conn.execute("SELECT * FROM rag.ingest('stats', 'b.md', %s)", (doc(4, "checkpoint"),))
    assert stats(conn, "stats") == recomputed(conn, "stats")
    assert stats(conn, "stats")[0] == 10
    # a new version of a.md retires its 6 chunks and adds 3; deleting b.md retires 4
    conn.execute("SELECT * FROM rag.ingest('stats', 'a.md', %s)", (doc(3, "wraparound"),))
    conn.execute("SELECT rag.delete_document('stats', 'b.md')")
    got = stats(conn, "stats")
    assert got == recomputed(conn, "stats")
    assert got[0] == 3 and not any(lx == "checkpoint" for lx, _ in got[1])
    # counts that fell to zero are deleted, not kept (a restore, or the rebuild, would not make them)
    zero = conn.execute(
        "SELECT (SELECT count(*) FROM rag.tenant_lexeme WHERE tenant = 'stats' AND live_chunks = 0)"
        " + (SELECT count(*) FROM rag.tenant_title WHERE tenant = 'stats' AND live_chunks = 0)"
    ).fetchone()[0]
    assert zero == 0
    # the rebuild (after a bulk load that bypassed the triggers) yields the same rows
    conn.execute("SELECT rag._rebuild_retrieval_stats()")
    assert stats(conn, "stats") == got


def plans(conn, sql: str, params: tuple) -> tuple[list, list[str]]:
    """Runs sql with auto_explain logging every nested plan; returns its rows and the plans."""
    seen: list[str] = []

    def handler(d) -> None:
        seen.append(d.message_primary or "")

    conn.add_notice_handler(handler)
    try:
        conn.execute("LOAD 'auto_explain'")
        for s in (
            "auto_explain.log_min_duration = 0",
            "auto_explain.log_nested_statements = on",
            "auto_explain.log_level = notice",
            "client_min_messages = notice",
        ):
            conn.execute(f"SET LOCAL {s}")
        rows = conn.execute(sql, params).fetchall()
    finally:
        conn.remove_notice_handler(handler)
        conn.execute("SET LOCAL auto_explain.log_min_duration = -1")
    return rows, seen


def test_own_hnsw_index_is_used_after_many_calls_and_not_for_other_tenants(conn):
    """A tenant with a partial HNSW index takes the index path (past PL/pgSQL's five-call plan caching),
    with the exact result on a small tenant, and a tiny tenant asked on the same connection is still searched
    exactly."""
    conn.execute("SELECT rag.create_tenant('own')")
    conn.execute("SELECT * FROM rag.ingest('own', 'a.md', %s)", (doc(45, "checkpoint"),))
    sql = "SELECT chunk_id FROM rag.retrieve(%s, %s, 10)"
    exact = conn.execute(sql, (Q, "own")).fetchall()
    n = conn.execute("SELECT rag._live_chunks('own')").fetchone()[0]
    assert n >= 40
    # the full-text leg's ranking (BM25 of its candidates) before the tenant has its own indexes
    fts_sql = (
        "SELECT chunk_id, fts_rank, fts_score FROM rag._candidates('own', rag._correct_question('own', %s, "
        "rag._params()), rag.embed(%s), 40, rag._params()) WHERE fts_rank IS NOT NULL ORDER BY fts_rank"
    )
    fts = {
        q: conn.execute(fts_sql, (q, q)).fetchall() for q in (Q, "checkpoint topic 3", "notes of the tenant")
    }
    assert all(fts.values())
    assert conn.execute("SELECT count(*) FROM rag._index_tenants(%s, 'own')", (n + 1,)).fetchone()[0] == 0
    built = conn.execute("SELECT tenant, index_name FROM rag._index_tenants(%s, 'own')", (n,)).fetchall()
    names = conn.execute(
        "SELECT rag._tenant_index_name('own'), rag._tenant_fts_index_name('own'), "
        "rag._tenant_title_index_name('own')"
    ).fetchone()
    # the partial HNSW index, the partial GIN one, then the partial GIN index of the tenant's titles
    assert built == [("own", names[0]), ("own", names[1]), ("own", names[2])]
    # the GIN index of the tenant's tsvectors is on rag.chunk_tsv's narrow rows (0.9.0), and the leg's ranking
    # through it (candidates' rows read back by ctid) is the one read through the table-wide index
    on = conn.execute(
        "SELECT indrelid::regclass::text FROM pg_index WHERE indexrelid = %s::regclass", (f"rag.{names[1]}",)
    )
    assert on.fetchone()[0] == "rag.chunk_tsv"
    assert {q: conn.execute(fts_sql, (q, q)).fetchall() for q in fts} == fts
    index = names[0]
    assert conn.execute("SELECT count(*) FROM rag._index_tenants(1, 'own')").fetchone()[0] == 0  # built once
    for i in range(7):
        rows, seen = plans(conn, sql, (Q, "own"))
        assert rows == exact, i
        # the index path was taken (the ANN query ran), never through the table-wide HNSW index; on a
        # tenant this small the planner may still prefer sorting its rows exactly to the tenant's own graph
        # (bench/plan_check.py shows the own index used at 10,000 and 350,000 chunks)
        ann = [p for p in seen if "ORDER BY c.embedding OPERATOR(public.<=>) $1 LIMIT $2" in p]
        assert ann, i
        assert not any("chunk_embedding_hnsw_idx" in p for p in ann), i
        assert any(f"Index Scan using {index} on chunk" in p or "chunk_active_idx" in p for p in ann), i
        # the full-text candidates are chosen by the query that names the tenant as a literal (so the planner
        # can prove the own GIN index's predicate and use it, as bench/plan_check.py shows at 1M); which index
        # the planner picks for 45 chunks is its cost estimate's business (it may read them, or filter the
        # table-wide GIN index's bitmap), not this function's
        named = "FROM rag.chunk_tsv AS t WHERE t.tenant = 'own' AND t.tsv OPERATOR(pg_catalog.@@) $1"
        assert any(named in p for p in seen), i
        rows, seen = plans(conn, sql, (WRAP, "tiny"))
        assert len(rows) == 10
        hnsw = ("Index Scan using chunk_hnsw_", "Index Scan using chunk_embedding_hnsw_idx")
        assert not any(h in p for p in seen for h in hnsw), i


def test_own_index_path_gives_a_reader_the_rows_of_exact_search_ties_included(conn):
    """Through the tenant's own HNSW index the vector leg ranks the index scan's rows by the distances and
    tie-break keys the scan read (no second read by primary key): a tenant reader gets every row and column of
    exact search, past PL/pgSQL's five-call plan caching, also where two documents hold the same chunks (equal
    distances, ordered by doc_key then chunk_index)."""
    role = "own_reader_" + uuid.uuid4().hex[:6]
    conn.execute("SELECT rag.create_tenant('twin')")
    for key in ("b.md", "a.md"):  # the same text twice: every distance tied between the two documents
        conn.execute("SELECT * FROM rag.ingest('twin', %s, %s)", (key, doc(25, "checkpoint")))
    conn.execute(f"CREATE ROLE {role} IN ROLE pgcite_reader")
    conn.execute("SELECT rag.grant_tenant('twin', %s)", (role,))
    sql = (
        "SELECT rank, chunk_id, doc_key, chunk_index, distance, trgm_score, fts_score, fused_score "
        "FROM rag.retrieve(%s, 'twin', 10)"
    )
    questions = (Q, "checkpoint topic 3", WRAP)

    def as_reader(log: bool = False) -> tuple[list, list[str]]:
        seen: list[str] = []

        def handler(d) -> None:
            seen.append(d.message_primary or "")

        if log:  # auto_explain set up by the owner, then the reader's calls logged
            conn.execute("LOAD 'auto_explain'")
            for s in (
                "auto_explain.log_min_duration = 0",
                "auto_explain.log_nested_statements = on",
                "auto_explain.log_level = notice",
                "client_min_messages = notice",
            ):
                conn.execute(f"SET LOCAL {s}")
            conn.add_notice_handler(handler)
        conn.execute(f"SET LOCAL ROLE {role}")
        try:
            return [conn.execute(sql, (q,)).fetchall() for q in questions], seen
        finally:
            conn.execute("RESET ROLE")
            if log:
                conn.remove_notice_handler(handler)
                conn.execute("SET LOCAL auto_explain.log_min_duration = -1")

    exact, _ = as_reader()
    # ties are there to break: the same chunk of both documents at the same distance, a.md first
    pairs = [(rows[i], rows[i + 1]) for rows in exact for i in range(len(rows) - 1)]
    tied = [(x, y) for x, y in pairs if x[4] == y[4] and x[3] == y[3]]
    assert tied and all((x[2], y[2]) == ("a.md", "b.md") for x, y in tied)
    n = conn.execute("SELECT rag._live_chunks('twin')").fetchone()[0]
    assert n >= 40
    built = [r[0] for r in conn.execute("SELECT index_name FROM rag._index_tenants(%s, 'twin')", (n,))]
    assert conn.execute("SELECT rag._tenant_index_name('twin')").fetchone()[0] in built
    for i in range(7):
        rows, seen = as_reader(log=i in (0, 6))
        assert rows == exact, i
        if seen:  # the index path ran: the ANN query with the scan's distances and keys
            ann = [p for p in seen if "ORDER BY c.embedding OPERATOR(public.<=>) $1 LIMIT $2" in p]
            assert len(ann) == len(questions) and all("AS raw" in p for p in ann), i


def test_the_vector_leg_ranks_chunks_the_other_legs_found_that_the_graph_did_not_return(conn):
    """Through a tenant's own HNSW graph the vector leg ranks, by exact distance, the graph's candidates
    together with the chunks the full-text and title legs found: a chunk nearer than those the graph returned
    gets the vector rank exact search gives it. Here 2,000 chunks and five more share one embedding, so every
    distance is 0 and exact search orders them by doc_key: the five (a0.md ... a4.md) first. The graph returns
    about 100 of the 2,005 (its first candidates); the question's five words, one in each of the five, find
    them through the full-text leg. Without the union all five ranked first only if the graph returned all
    five."""
    role = "miss_reader_" + uuid.uuid4().hex[:6]
    conn.execute("SELECT rag.create_tenant('annmiss')")
    e = [round(1 / 384**0.5, 6)] * 384
    filler = [{"content": f"Shared filler paragraph number {i}.", "embedding": e} for i in range(2000)]
    conn.execute("SELECT * FROM rag.store_document('annmiss', 'b.md', %s)", (json.dumps(filler),))
    words = ["zyxquorum", "plivnet", "drossark", "quembly", "tarvolin"]
    for i, w in enumerate(words):
        item = [{"content": f"The {w} setting of the tenant.", "embedding": e}]
        conn.execute("SELECT * FROM rag.store_document('annmiss', %s, %s)", (f"a{i}.md", json.dumps(item)))
    conn.execute(f"CREATE ROLE {role} IN ROLE pgcite_reader")
    conn.execute("SELECT rag.grant_tenant('annmiss', %s)", (role,))
    question = "Which " + " and ".join(words) + " settings are there?"

    def vector_leg() -> list[tuple]:
        conn.execute(f"SET LOCAL ROLE {role}")
        try:
            return conn.execute(
                "SELECT vec_rank, doc_key, chunk_id, distance "
                "FROM rag.explain(%s, 'annmiss', 10, %s::vector) WHERE vec_rank IS NOT NULL "
                "ORDER BY vec_rank",
                (question, str(e)),
            ).fetchall()
        finally:
            conn.execute("RESET ROLE")

    exact = vector_leg()  # 2,005 live chunks: exact search
    assert [r[1] for r in exact[:6]] == [f"a{i}.md" for i in range(5)] + ["b.md"]
    assert len(exact) == 40 and {r[3] for r in exact} == {0.0}
    n = conn.execute("SELECT rag._live_chunks('annmiss')").fetchone()[0]
    built = [r[0] for r in conn.execute("SELECT index_name FROM rag._index_tenants(%s, 'annmiss')", (n,))]
    assert conn.execute("SELECT rag._tenant_index_name('annmiss')").fetchone()[0] in built
    # the graph's rows: fewer than the tenant's, so the five are not all there but by chance
    ann_rows = conn.execute("SELECT rag._ann_rows(%s, rag._ann_search(%s, 40, true, NULL), true)", (n, n))
    assert ann_rows.fetchone()[0] < n / 10
    for _ in range(6):  # past PL/pgSQL's plan caching
        own = vector_leg()
        assert own[:5] == exact[:5]
        assert len(own) == 40 and {r[3] for r in own} == {0.0}


WRAP = "How do I prevent transaction ID wraparound failures?"


def test_own_title_index_serves_the_title_leg_with_the_same_results(conn):
    """The partial GIN index of a tenant's titles (rag._index_tenants) is what the title leg reads once it
    exists, even when other tenants share the same titles, and a tenant reader gets the same rows, title
    scores included, as before it was built."""
    role = "ttl_reader_" + uuid.uuid4().hex[:6]
    conn.execute("SELECT rag.create_tenant('ttl')")
    conn.execute("SELECT rag.create_tenant('ttl_other')")
    for t in ("ttl", "ttl_other"):  # the same titles in two tenants: the table-wide index holds both
        conn.execute("SELECT * FROM rag.ingest(%s, 'a.md', %s)", (t, doc(45, "checkpoint")))
    conn.execute(f"CREATE ROLE {role} IN ROLE pgcite_reader")
    conn.execute("SELECT rag.grant_tenant('ttl', %s)", (role,))
    sql = (
        "SELECT chunk_id, rank, trgm_score, fts_score, distance, fused_score FROM rag.retrieve(%s, 'ttl', 10)"
    )
    questions = ("Checkpoint topic 7", "notes about the checkpoint topic 12 subject", Q)

    def as_reader() -> list:
        conn.execute(f"SET LOCAL ROLE {role}")
        try:
            return [conn.execute(sql, (q,)).fetchall() for q in questions]
        finally:
            conn.execute("RESET ROLE")

    before = as_reader()
    assert any(r[2] is not None for rows in before for r in rows)  # the title leg contributes
    n = conn.execute("SELECT rag._live_chunks('ttl')").fetchone()[0]
    built = [r[0] for r in conn.execute("SELECT index_name FROM rag._index_tenants(%s, 'ttl')", (n,))]
    name = conn.execute("SELECT rag._tenant_title_index_name('ttl')").fetchone()[0]
    assert name in built
    other = conn.execute("SELECT rag._tenant_title_index_name('ttl_other')").fetchone()[0]
    assert conn.execute("SELECT to_regclass('rag.' || %s)", (other,)).fetchone()[0] is None  # one tenant's
    for _ in range(7):  # past PL/pgSQL's five-call plan caching
        assert as_reader() == before
    # a table of a hundred titles is read whole (Seq Scan) when it has no statistics; with that plan ruled out
    # the leg reads only the tenant's titles: through its own index or the primary key (tenant, title), never
    # the table-wide GIN index (at 1M the planner picks the own index by itself: bench/title_leg.py); a title
    # it scores is read again where it was found (Tid Scan, since session 25)
    conn.execute("SET LOCAL enable_seqscan = off")
    _, seen = plans(conn, sql, (questions[0],))
    title = [ln for p in seen for ln in p.splitlines() if "on tenant_title" in ln]
    assert title and all(
        f"on {name}" in ln or "tenant_title_pkey" in ln or "Tid Scan on tenant_title" in ln for ln in title
    ), title
    assert any(f"on {name}" in ln or "tenant_title_pkey" in ln for ln in title), title
    # and the tenant's readers still cannot read the table (the index changes no privilege)
    conn.execute(f"SET LOCAL ROLE {role}")
    try:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM rag.tenant_title")
    finally:
        conn.rollback()


def test_the_title_leg_reads_a_long_questions_first_500_characters(conn):
    """word_similarity costs in proportion to the question's length for every title it scores (a question
    of 3,990 characters cost the largest tenant's title leg 1 s at 1M chunks), so the title leg compares
    titles with the corrected question's whole words within its first 500 characters: a title named there
    still scores, one named only after them does not, and a question of up to 500 characters is read whole."""
    cut = [
        conn.execute("SELECT rag._title_question(%s)", (q,)).fetchone()[0]
        for q in ("abcd " * 200, "x" * 600, "y" * 500, "short question")
    ]
    assert cut == [("abcd " * 100)[:499], "x" * 500, "y" * 500, "short question"]
    conn.execute("SELECT rag.create_tenant('ttl_long')")
    conn.execute(
        "SELECT * FROM rag.ingest('ttl_long', 'a.md', %s)",
        (
            "# Checkpoint tuning\n\nHow the spread of checkpoint writes is set.\n\n"
            "# Wraparound\n\nHow old rows are frozen before the counter wraps.",
        ),
    )
    filler = " ".join(["rows"] * 130)  # 649 characters, words of the corpus that no title has

    def titled(question: str) -> set:
        return {
            r[0]
            for r in conn.execute(
                "SELECT title FROM rag.retrieve(%s, 'ttl_long', 5) WHERE trgm_score IS NOT NULL", (question,)
            )
        }

    assert titled("checkpoint tuning " + filler) == {"Checkpoint tuning"}
    assert titled(filler + " checkpoint tuning") == set()
    assert titled(" ".join(["rows"] * 70) + " checkpoint tuning") == {"Checkpoint tuning"}  # 367 characters


def title_leg_reference(conn, tenant: str, question: str, depth: int = 40) -> list:
    """The title leg as its comment specifies it, without the trigram bound: every title of the tenant
    sharing a lexeme with the question scored by word_similarity (rounded to 6 places), those at or above
    min_title_similarity kept down to the score at which their chunks (best first) reach depth, their
    chunks in (score desc, doc_key, chunk_index, chunk_id) order: [(chunk_id, score)]."""
    tq = conn.execute(
        "SELECT rag._title_question(rag._correct_question(%s, %s, rag._params()))", (tenant, question)
    ).fetchone()[0]
    min_title = conn.execute("SELECT (rag._params() ->> 'min_title_similarity')::float8").fetchone()[0]
    scored = conn.execute(
        "SELECT x.title, x.live_chunks, round(word_similarity(x.stripped, %s)::numeric, 6)::float8 "
        "FROM rag.tenant_title AS x JOIN rag.tenant AS t USING (tenant) "
        "WHERE x.tenant = %s AND x.live_chunks > 0 "
        "AND x.tsv @@ rag._any_lexeme(tsvector_to_array(to_tsvector(t.ts_config, %s)))",
        (tq, tenant, tq),
    ).fetchall()
    above = sorted((r for r in scored if r[2] >= min_title), key=lambda r: -r[2])
    before, cutoff = 0, None
    for _, n, sc in above:
        if before < depth:
            cutoff = sc
        before += n
    kept = {t: sc for t, _, sc in above if cutoff is not None and sc >= cutoff}
    rows = conn.execute(
        "SELECT chunk_id, doc_key, chunk_index, title FROM rag.chunk "
        "WHERE tenant = %s AND retired_at IS NULL AND title = ANY (%s)",
        (tenant, list(kept)),
    ).fetchall()
    rows.sort(key=lambda r: (-kept[r[3]], r[1], r[2], r[0]))
    return [(r[0], kept[r[3]]) for r in rows[:depth]]


def title_leg_rows(conn, tenant: str, question: str, qemb: str) -> list:
    """The title leg's rows of rag._candidates (as rag._answer calls it): [(chunk_id, score)], ranked."""
    corrected = conn.execute(
        "SELECT rag._correct_question(%s, %s, rag._params())", (tenant, question)
    ).fetchone()[0]
    return conn.execute(
        "SELECT chunk_id, trgm_score FROM rag._candidates(%s, %s, %s::vector, 40, rag._params()) "
        "WHERE trgm_rank IS NOT NULL ORDER BY trgm_rank",
        (tenant, corrected, qemb),
    ).fetchall()


def test_the_title_legs_trigram_bound_keeps_every_title_word_similarity_keeps(conn):
    """The title leg computes word_similarity only for titles whose share of trigrams found in the question
    reaches min_title_similarity (pg_trgm's word similarity is at most that share). Titles made of the
    question's words and others, whose scores lie on both sides of every cut-off (among them titles whose
    score is exactly their share), give the leg's rows of the unbounded computation for cut-offs from 0 to 1,
    for a tenant reading its titles by primary key and for one reading them through GIN."""
    rnd = random.Random(21)
    qwords = ["checkpoint", "writes", "spread", "interval", "tuning", "wal", "segments"]
    other = ["vacuum", "freeze", "planner", "cost", "index", "bloat", "replica", "slot", "locks", "toast"]
    sections = []
    for _ in range(120):
        words = rnd.sample(qwords, rnd.randint(1, 3)) + rnd.sample(other, rnd.randint(0, 3))
        rnd.shuffle(words)
        title = " ".join(words).capitalize()
        for _ in range(rnd.randint(1, 3)):
            sections.append(f"# {title}\n\nNotes on {' '.join(words)} in part {len(sections)}.")
    # titles that are one question word, or its contiguous words: word_similarity equals their share
    sections += [f"# {w.title()}\n\nAbout {w}." for w in qwords]
    sections.append("# Checkpoint writes\n\nAbout checkpoint writes.")
    body = "\n\n".join(sections)
    question = "How are checkpoint writes spread over the checkpoint interval when tuning wal segments?"
    for tenant in ("tb_small", "tb_gin"):
        conn.execute("SELECT rag.create_tenant(%s)", (tenant,))
        conn.execute("SELECT * FROM rag.ingest(%s, 'a.md', %s)", (tenant, body))
    n = conn.execute("SELECT rag._live_chunks('tb_gin')").fetchone()[0]
    assert n <= 2000  # read by primary key unless it has its own title index:
    assert len(conn.execute("SELECT * FROM rag._index_tenants(%s, 'tb_gin')", (n,)).fetchall()) == 3
    qemb = conn.execute("SELECT rag.embed(%s)::text", (question,)).fetchone()[0]
    tq = conn.execute(
        "SELECT rag._title_question(rag._correct_question('tb_gin', %s, '{}'))", (question,)
    ).fetchone()[0]
    # the titles sharing a word with the question score on both sides of every cut-off tried
    scores = [
        r[0]
        for r in conn.execute(
            "SELECT round(word_similarity(stripped, %s)::numeric, 6)::float8 FROM rag.tenant_title WHERE "
            "tenant = 'tb_gin' AND tsv @@ rag._any_lexeme(tsvector_to_array(to_tsvector('english', %s)))",
            (tq, tq),
        )
    ]
    assert all(min(scores) < c <= max(scores) for c in (0.3, 0.5, 0.6, 0.75)), sorted(scores)
    assert 1.0 in scores and 0.5 in scores  # a title exactly at the default cut-off
    for cut in ("0", "0.3", "0.5", "0.6", "0.75", "1"):
        conn.execute("SELECT rag.set_config('min_title_similarity', %s)", (cut,))
        for tenant in ("tb_small", "tb_gin"):
            want = title_leg_reference(conn, tenant, question)
            got = title_leg_rows(conn, tenant, question, qemb)
            assert got == want, (cut, tenant)
            assert got or cut == "1"


def test_the_title_leg_scores_only_titles_whose_bound_reaches_the_first_titles_cut_off(conn):
    """The title leg scores the four titles of the best trigram bound first; when those passing
    min_title_similarity hold `depth` chunks, a title whose bound is under their cut-off is not scored
    (word_similarity is at most the bound, and such a title comes after the one that sets the cut-off).
    Titles of 1-15 chunks made of the question's words and others, ties differing only in case: the leg's
    rows equal the unbounded reference for depths 1-40 and cut-offs 0-0.75, and word_similarity runs for
    fewer titles than pass min_title_similarity's bound (counted with track_functions)."""
    rnd = random.Random(25)
    qwords = ["checkpoint", "writes", "spread", "interval", "tuning", "wal", "segments"]
    other = ["vacuum", "freeze", "planner", "cost", "index", "bloat", "replica", "slot", "locks", "toast"]
    sections = []
    titles = set()
    while len(titles) < 70:
        words = rnd.sample(qwords, rnd.randint(1, 4)) + rnd.sample(other, rnd.randint(0, 2))
        rnd.shuffle(words)
        titles.add(" ".join(words).capitalize())
    # the same words in capitals: the same score, a tie broken by the title
    titles |= {t.upper() for t in rnd.sample(sorted(titles), 12)}
    for title in sorted(titles):
        for _ in range(rnd.randint(1, 15)):
            sections.append(f"# {title}\n\nNotes on {title.lower()} in part {len(sections)}.")
    conn.execute("SELECT rag.create_tenant('tprune')")
    conn.execute("SELECT * FROM rag.ingest('tprune', 'a.md', %s)", ("\n\n".join(sections),))
    question = "How are checkpoint writes spread over the checkpoint interval when tuning wal segments?"
    qemb = conn.execute("SELECT rag.embed(%s)::text", (question,)).fetchone()[0]
    corrected = conn.execute(
        "SELECT rag._correct_question('tprune', %s, rag._params())", (question,)
    ).fetchone()[0]
    tq = conn.execute("SELECT rag._title_question(%s)", (corrected,)).fetchone()[0]
    ws = conn.execute("SELECT oid FROM pg_proc WHERE proname = 'word_similarity'").fetchone()[0]
    conn.execute("SET LOCAL track_functions = 'all'")
    pruned = 0
    for cut in ("0", "0.3", "0.5", "0.75"):
        conn.execute("SELECT rag.set_config('min_title_similarity', %s)", (cut,))
        passing = conn.execute(
            "SELECT count(*) FROM rag.tenant_title WHERE tenant = 'tprune' AND live_chunks > 0 "
            "AND tsv @@ rag._any_lexeme(tsvector_to_array(to_tsvector('english', %(q)s))) "
            "AND length(array_to_tsvector(show_trgm(%(q)s))) "
            "- length(ts_delete(array_to_tsvector(show_trgm(%(q)s)), trgm)) "
            ">= (%(c)s - 1e-6) * cardinality(trgm)",
            {"q": tq, "c": float(cut)},
        ).fetchone()[0]
        for depth in (1, 3, 10, 40):
            want = title_leg_reference(conn, "tprune", question, depth)
            calls = conn.execute("SELECT coalesce(pg_stat_get_xact_function_calls(%s), 0)", (ws,)).fetchone()[
                0
            ]
            got = conn.execute(
                "SELECT chunk_id, trgm_score FROM rag._candidates('tprune', %s, %s::vector, %s, "
                "rag._params()) WHERE trgm_rank IS NOT NULL ORDER BY trgm_rank",
                (corrected, qemb, depth),
            ).fetchall()
            calls = conn.execute(
                "SELECT coalesce(pg_stat_get_xact_function_calls(%s), 0) - %s", (ws, calls)
            ).fetchone()[0]
            assert got == want, (cut, depth)
            assert len({s for _, s in got}) <= calls <= passing, (cut, depth)
            pruned += calls < passing
    assert pruned >= 8, pruned


def test_the_title_leg_reads_only_the_first_chunks_of_a_title_that_heads_many(conn):
    """A title such as "Parameters" heads many chunks of many documents: the title leg reads each of its best
    titles' chunks in the leg's own order (doc_key, chunk_index, chunk_id) through rag.chunk_title_order_idx,
    the first 40 of each, not all of them. Two tied titles of 48 chunks each, documents ingested out of key
    order, one document replaced (its old chunks retired): the leg's rows equal the unbounded reference, past
    PL/pgSQL's plan caching, and the index is what is read."""
    conn.execute("SELECT rag.create_tenant('tord')")
    keys = [f"d{i:02d}.md" for i in range(12)]
    random.Random(24).shuffle(keys)

    def body(key: str, version: int) -> str:
        return "\n\n".join(
            f"# {t}\n\n{t} of {key}, part {j}, version {version}: settings for the checkpoint writer."
            for j in range(4)
            for t in ("Parameters", "Examples")
        )

    for key in keys:
        conn.execute("SELECT * FROM rag.ingest('tord', %s, %s)", (key, body(key, 1)))
    conn.execute("SELECT * FROM rag.ingest('tord', 'd00.md', %s)", (body("d00.md", 2),))
    counts = dict(
        conn.execute(
            "SELECT title, count(*) FROM rag.chunk WHERE tenant = 'tord' AND retired_at IS NULL GROUP BY 1"
        ).fetchall()
    )
    assert counts == {"Parameters": 48, "Examples": 48}, counts
    assert (
        conn.execute(
            "SELECT count(*) FROM rag.chunk WHERE tenant = 'tord' AND retired_at IS NOT NULL"
        ).fetchone()[0]
        == 8
    )
    question = "What are the parameters and the examples?"
    qemb = conn.execute("SELECT rag.embed(%s)::text", (question,)).fetchone()[0]
    want = title_leg_reference(conn, "tord", question)
    assert len(want) == 40 and {sc for _, sc in want} == {1.0}
    # tied titles: both titles' chunks among the 40, in key order, not chunk id order
    titles = dict(conn.execute("SELECT chunk_id, title FROM rag.chunk WHERE tenant = 'tord'").fetchall())
    assert {titles[c] for c, _ in want} == {"Parameters", "Examples"}
    assert [c for c, _ in want] != sorted(c for c, _ in want)
    for _ in range(7):
        assert title_leg_rows(conn, "tord", question, qemb) == want
    corrected = conn.execute(
        "SELECT rag._correct_question('tord', %s, rag._params())", (question,)
    ).fetchone()[0]
    # the index serves the leg's order (its keys, collation and predicate match the statement): with sorts
    # ruled out, it is the plan left (in a table of a few hundred rows any plan is fast, and the planner takes
    # another; at 1M it takes this one by itself, docs/BENCHMARKS.md session 24)
    conn.execute("SET LOCAL enable_sort = off")
    conn.execute("SET LOCAL enable_incremental_sort = off")
    conn.execute("DISCARD PLANS")  # the connection's cached plans were made without the settings
    _, seen = plans(
        conn,
        "SELECT count(*) FROM rag._candidates('tord', %s, %s::vector, 40, rag._params())",
        (corrected, qemb),
    )
    chunks = [p for p in seen if "k.title = ti.title" in p]
    assert chunks and all("Index Scan using chunk_title_order_idx" in p for p in chunks), chunks
    # (the other branch, chunks of keys over 2,048 bytes stored before 0.9.0, is sorted: it holds none here)
    assert not any("Sort Key: k.doc_key" in p for p in chunks), chunks


def test_index_tenants_rejects_a_bad_minimum(conn):
    try:
        conn.execute("SELECT * FROM rag._index_tenants(0)")
    except psycopg.Error as e:
        assert e.sqlstate == "22023"
    else:
        raise AssertionError("no error")


def test_full_text_leg_ranks_a_bounded_candidate_set(conn):
    """Lexemes are taken rarest first while their chunk counts fit the budget (p_depth * 10): under it the
    leg ranks every match, exactly as an unbounded leg; over it only the matches of the rare lexemes."""
    conn.execute("SELECT rag.create_tenant('fts')")
    body = "\n\n".join(
        f"# Part {i}\n\nNotes on subject {i} about vacuum{' and wraparound' if i % 20 == 0 else ''}."
        for i in range(1, 61)
    )
    conn.execute("SELECT * FROM rag.ingest('fts', 'c.md', %s)", (body,))
    q = "vacuum wraparound"
    leg = (
        "SELECT x.chunk_id, c.content FROM rag._candidates('fts', %s, rag.embed(%s), %s, rag._params()) AS x "
        "JOIN rag.chunk AS c USING (chunk_id) WHERE x.fts_rank IS NOT NULL ORDER BY x.fts_rank"
    )
    # depth 40: budget 400 >= 63 matches of both lexemes, so every match is ranked
    full = conn.execute(leg, (q, q, 40)).fetchall()
    content = dict(conn.execute("SELECT chunk_id, content FROM rag.chunk WHERE tenant = 'fts'").fetchall())
    unbounded = [(cid, content[cid]) for cid, _ in bm25_reference(conn, "fts", q, 40)]
    assert full == unbounded and len(full) == 40
    # depth 2: budget 20 < 3 + 60, so only the 3 chunks with the rare lexeme are candidates
    small = conn.execute(leg, (q, q, 2)).fetchall()
    assert len(small) == 2 and all("wraparound" in content for _, content in small)
    # no lexeme fits (both in 60 chunks): the rarest one's newest 20 matches are ranked, deterministically
    runs = {tuple(conn.execute(leg, ("vacuum notes", "vacuum notes", 2)).fetchall()) for _ in range(3)}
    assert len(runs) == 1 and len(next(iter(runs))) == 2
    newest = {
        r[0]
        for r in conn.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'fts' ORDER BY 1 DESC LIMIT 20")
    }
    assert {cid for cid, _ in next(iter(runs))} <= newest
    # one lexeme, over the budget: its newest matches
    one = conn.execute(leg, ("vacuum", "vacuum", 2)).fetchall()
    assert len(one) == 2 and {cid for cid, _ in one} <= newest


def test_full_text_leg_finds_the_newest_matches_of_dense_lexemes_among_the_newest_chunks(conn):
    """When even the rarest lexeme is over the budget and its matches (or, for two, their estimate) are
    dense in the tenant, the leg reads the tenant's newest live chunks (rag.chunk_tsv's (tenant, chunk_id)
    index) until the budget's matches are found, instead of fetching every match through GIN: the candidates
    are the same, the newest `budget` matches of the tenant's live chunks, so the ranking equals BM25 over
    exactly those. Another tenant's newer chunks and the tenant's retired ones are never candidates; when the
    newest chunks do not hold the budget's matches, GIN finds them as before."""
    a = "\n\n".join(
        f"# Part {i}\n\nNotes on subject {i} about vacuum{' alpha beta' if i <= 80 else ''}, case {i % 7}."
        for i in range(1, 121)
    )
    conn.execute("SELECT rag.create_tenant('dense')")
    conn.execute("SELECT * FROM rag.ingest('dense', 'a.md', %s)", (a,))
    # newer chunk ids: another tenant's, and the tenant's own, retired
    conn.execute("SELECT rag.create_tenant('dense_o')")
    conn.execute("SELECT * FROM rag.ingest('dense_o', 'o.md', %s)", (doc(20, "vacuum"),))
    conn.execute("SELECT * FROM rag.ingest('dense', 'b.md', %s)", (doc(15, "vacuum alpha beta"),))
    conn.execute("SELECT rag.delete_document('dense', 'b.md')")
    assert conn.execute("SELECT rag._live_chunks('dense')").fetchone()[0] == 120
    leg = (
        "SELECT x.chunk_id, x.fts_score FROM rag._candidates('dense', %s, rag.embed(%s), %s, rag._params())"
        " AS x "
        "WHERE x.fts_rank IS NOT NULL ORDER BY x.fts_rank"
    )

    def expected(q: str, match: str, depth: int) -> list:
        newest = [
            r[0]
            for r in conn.execute(
                "SELECT chunk_id FROM rag.chunk WHERE tenant = 'dense' AND retired_at IS NULL"
                " AND tsv @@ %s::tsquery "
                "ORDER BY chunk_id DESC LIMIT %s",
                (match, depth * 10),
            )
        ]
        ranked = [(cid, s) for cid, s in bm25_reference(conn, "dense", q, 10**6) if cid in set(newest)]
        return ranked[:depth]

    # "vacuum": in all 120 chunks, over the budget of 20 (depth 2): the newest chunks are read (40 at most)
    for q, match, depth, scan_only in (
        ("vacuum", "vacuum", 2, True),
        # alpha and beta: 80 chunks each, estimated 53 together: the newest 45 chunks hold 5 of the budget's
        # 10, so GIN finds the newest 10 that hold both
        ("alpha beta", "alpha & beta", 1, False),
    ):
        want = expected(q, match, depth)
        rows, seen = plans(conn, leg, (q, q, depth))
        assert rows == want and len(rows) == depth, (q, rows, want)
        newest_scan = [p for p in seen if "Index Scan Backward using chunk_tsv_tenant_newest_idx" in p]
        # the statements of the other paths (the tenant's own GIN index, the table's, the tenant's rows)
        gin = [p for p in seen if "WITH m AS MATERIALIZED" in p or "t.tsv OPERATOR(pg_catalog.@@) $1" in p]
        assert newest_scan, q
        assert bool(gin) != scan_only, (q, seen)
    # the newest chunks of "vacuum" are a.md's last, not b.md's (retired) nor dense_o's
    rows = conn.execute(leg, ("vacuum", "vacuum", 2)).fetchall()
    keys = {
        r[0]
        for r in conn.execute(
            "SELECT doc_key FROM rag.chunk WHERE chunk_id = ANY(%s)", ([cid for cid, _ in rows],)
        )
    }
    assert keys == {"a.md"}


def test_full_text_leg_reads_the_kept_matches_tsvectors_back_when_the_rarest_lexeme_is_over_the_budget(conn):
    """Through a tenant's own GIN index, when even the rarest lexeme is over the budget, the matches of the
    two rarest are sorted with their ctids (not their tsvectors) and the newest `budget` rows read back by
    those ctids: the candidates and their scores equal BM25 over exactly the tenant's newest `budget` live
    matches, chunks whose tsvectors are kept and chunks whose are over 2 kB (read by primary key) alike;
    another tenant's matches and the tenant's retired ones are never candidates."""
    rnd = random.Random(26)

    def items(n: int, words, extra=lambda i: "") -> str:
        return json.dumps(
            [
                {
                    "title": f"Part {i}",
                    "content": f"Notes on {words(i)}subject {i}, case {i % 7}.{extra(i)}",
                    "embedding": [round(rnd.gauss(0, 1), 3) for _ in range(384)],
                }
                for i in range(n)
            ]
        )

    def big(i: int) -> str:
        # a few of the newest matches hold eight random words of 300 letters: a tsvector of ~2.5 kB, not kept
        # from the scan (read by primary key when ranked)
        if i % 12 or i < 240:
            return ""
        return " " + " ".join("".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=300)) for _ in range(8))

    store = "SELECT * FROM rag.store_document(%s, %s, %s::jsonb)"
    conn.execute("SELECT rag.create_tenant('rare')")
    # beta (the rarest) in 50 of 300 chunks, always with alpha (in 100)
    both = lambda i: ("alpha " if i % 3 == 0 else "") + ("beta " if i % 6 == 0 else "")  # noqa: E731
    conn.execute(store, ("rare", "a.md", items(300, both, big)))
    conn.execute("SELECT rag.create_tenant('rare_o')")
    conn.execute(store, ("rare_o", "o.md", items(20, lambda i: "alpha beta ")))
    conn.execute(store, ("rare", "b.md", items(15, lambda i: "alpha beta ")))
    conn.execute("SELECT rag.delete_document('rare', 'b.md')")
    n = conn.execute("SELECT rag._live_chunks('rare')").fetchone()[0]
    assert len(conn.execute("SELECT * FROM rag._index_tenants(%s, 'rare')", (n,)).fetchall()) == 3
    big = conn.execute(
        "SELECT count(*) FROM rag.chunk_tsv AS t WHERE t.tenant = 'rare' AND t.tsv @@ 'alpha & beta'"
        " AND (pg_column_size(t.tsv) > 2048 OR pg_column_compression(t.tsv) IS NOT NULL)"
    ).fetchone()[0]
    assert big == 5
    leg = (
        "SELECT x.chunk_id, x.fts_score FROM rag._candidates('rare', %s, rag.embed(%s), %s, rag._params())"
        " AS x WHERE x.fts_rank IS NOT NULL ORDER BY x.fts_rank"
    )
    matches = [
        r[0]
        for r in conn.execute(
            "SELECT chunk_id FROM rag.chunk WHERE tenant = 'rare' AND retired_at IS NULL"
            " AND tsv @@ 'alpha & beta'::tsquery ORDER BY chunk_id DESC"
        )
    ]
    assert len(matches) >= 50
    ranked = bm25_reference(conn, "rare", "alpha beta", 10**6)
    # depth 2: budget 20 of the 50 matches (beta, the rarest, is in 50 chunks); depth 4: 40 of them
    for depth in (2, 4):
        newest = set(matches[: depth * 10])
        want = [(cid, s) for cid, s in ranked if cid in newest][:depth]
        rows, seen = plans(conn, leg, ("alpha beta", "alpha beta", depth))
        assert rows == want and len(rows) == depth, (depth, rows, want)
        readback = "r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
        # the statement that reads the rows back by ctid ran (a TID scan at scale; this table is small enough
        # for the planner to filter a sequential scan of it by ctid instead)
        assert [p for p in seen if readback in p], seen
    # every match's score, ranked by the leg when the budget holds them all (depth 6: 60 >= 50)
    rows = conn.execute(leg, ("alpha beta", "alpha beta", 6)).fetchall()
    assert rows == [(cid, s) for cid, s in ranked if cid in set(matches)][:6]
    # a caller's enable_tidscan = off is not the function's (a read-back by ctid would scan the whole table)
    conn.execute("SET LOCAL enable_tidscan = off")
    assert conn.execute(leg, ("alpha beta", "alpha beta", 6)).fetchall() == rows
    assert conn.execute("SHOW enable_tidscan").fetchone()[0] == "off"
    config = conn.execute("SELECT proconfig FROM pg_proc WHERE oid = 'rag._candidates'::regproc").fetchone()
    assert "enable_tidscan=on" in config[0]


def test_full_text_leg_weighs_a_question_word_by_how_rare_it_is_in_the_tenant(conn):
    """The full-text leg ranks by BM25 over the tenant's own document frequencies: the one chunk that holds
    the question's rare word ranks above a chunk repeating a word every chunk has (ts_rank_cd, which weighed
    the question's words alike, put the repetitions first); a tenant reader gets those scores, and the leg's
    are BM25 recomputed from the chunks' tsvectors. Another tenant's chunks of the rare word change none."""
    role = "idf_reader_" + uuid.uuid4().hex[:6]
    parts = [f"# Part {i}\n\nThe table of part {i} lists its rows." for i in range(12)]
    parts.append("# Crowded\n\nThe table, the table and the table: one table beside another table.")
    parts.append("# Brewing\n\nNotes on zymurgy.")
    conn.execute("SELECT rag.create_tenant('idf')")
    conn.execute("SELECT * FROM rag.ingest('idf', 'c.md', %s)", ("\n\n".join(parts),))
    conn.execute(f"CREATE ROLE {role} IN ROLE pgcite_reader")
    conn.execute("SELECT rag.grant_tenant('idf', %s)", (role,))
    q = "zymurgy table"
    ids = dict(
        conn.execute(
            "SELECT CASE WHEN content LIKE '%%zymurgy%%' THEN 'rare' ELSE 'crowded' END, chunk_id "
            "FROM rag.chunk WHERE tenant = 'idf' "
            "AND (content LIKE '%%zymurgy%%' OR content LIKE '%%beside%%')"
        ).fetchall()
    )
    # the old scorer would have put the repetitions first
    cd = dict(
        conn.execute(
            "SELECT chunk_id, ts_rank_cd(tsv, rag._fts_query('english', %s), 1) FROM rag.chunk "
            "WHERE chunk_id = ANY (%s)",
            (q, list(ids.values())),
        ).fetchall()
    )
    assert cd[ids["crowded"]] > cd[ids["rare"]]
    leg = (
        "SELECT chunk_id, fts_score FROM rag._candidates('idf', %s, rag.embed(%s), 40, rag._params()) "
        "WHERE fts_rank IS NOT NULL ORDER BY fts_rank"
    )

    def as_reader(sql: str, params: tuple) -> list:
        conn.execute(f"SET LOCAL ROLE {role}")
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.execute("RESET ROLE")

    # a reader's rag.retrieve: the rare word's chunk has the larger full-text score
    scores = dict(as_reader("SELECT chunk_id, fts_score FROM rag.retrieve(%s, 'idf', 14)", (q,)))
    assert scores[ids["rare"]] > scores[ids["crowded"]] > 0
    # the leg (as its owner reads it) is BM25 recomputed from the tsvectors, in its total order
    mine = conn.execute(leg, (q, q)).fetchall()
    ref = bm25_reference(conn, "idf", q, 40)
    assert [c for c, _ in mine] == [c for c, _ in ref] and mine[0][0] == ids["rare"]
    assert all(abs(a - b) < 2e-6 for (_, a), (_, b) in zip(mine, ref, strict=True))
    # document frequencies are the tenant's own: another tenant full of the rare word changes no score
    conn.execute("SELECT rag.create_tenant('idf_other')")
    conn.execute(
        "SELECT * FROM rag.ingest('idf_other', 'z.md', %s)",
        ("\n\n".join(f"# Z {i}\n\nZymurgy and zymurgy again, {i}." for i in range(20)),),
    )
    assert conn.execute(leg, (q, q)).fetchall() == mine


def test_another_tenants_ingest_does_not_switch_a_tenants_vector_search(conn):
    """Exact or approximate search is chosen by the tenant's own size (and its own index), never by the
    table's: a tenant above exact_search_limit keeps the same path and the same result when another tenant
    grows to nine tenths of the table."""
    conn.execute("SELECT rag.set_config('exact_search_limit', '10')")
    conn.execute("SELECT rag.create_tenant('mine')")
    conn.execute("SELECT * FROM rag.ingest('mine', 'a.md', %s)", (doc(45, "checkpoint"),))
    sql = "SELECT chunk_id, distance FROM rag.retrieve(%s, %s, 10)"
    ann = "ORDER BY c.embedding OPERATOR(public.<=>) $1 LIMIT $2"
    before, seen = plans(conn, sql, (Q, "mine"))
    assert any(ann in p for p in seen)
    # another tenant with ten times this tenant's chunks (embeddings given: no model time)
    conn.execute("SELECT rag.create_tenant('theirs')")
    rng = random.Random(7)
    for d in range(5):
        items = []
        for i in range(100):
            v = [rng.gauss(0, 1) for _ in range(384)]
            items.append({"content": f"Other tenant text {d} {i} about checkpoints.", "embedding": v})
        conn.execute("SELECT * FROM rag.store_document('theirs', %s, %s)", (f"d{d}", json.dumps(items)))
    live = conn.execute("SELECT rag._live_chunks('mine'), sum(live_chunks) FROM rag.tenant_stat").fetchone()
    assert live[0] * 10 < live[1]
    after, seen = plans(conn, sql, (Q, "mine"))
    assert any(ann in p for p in seen)
    assert after == before


# rag._correct_question before rag.word (0.5.0 round 2): the tenant's own rag.term rows tested with %, the
# reference the bounded lookup must agree with on every question
OLD_CORRECT = """
CREATE FUNCTION pg_temp.old_correct(p_tenant text, p_question text, p_params jsonb) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    words text [] := ARRAY(
        SELECT m.a[1]
        FROM pg_catalog.regexp_matches(pg_catalog.lower(p_question), '[[:alnum:]_]+', 'g')
            WITH ORDINALITY AS m (a, n)
        ORDER BY m.n
    );
    min_similarity float8 := (p_params ->> 'typo_similarity')::float8;
    unknown text [];
    real_words text [] := '{}';
    corrected text;
BEGIN
    PERFORM pg_catalog.set_config('pg_trgm.similarity_threshold', '0.3', true);
    SELECT pg_catalog.array_agg(DISTINCT u.word) INTO unknown
    FROM pg_catalog.unnest(words) AS u (word)
    WHERE NOT EXISTS (SELECT FROM rag.term AS k WHERE k.tenant = p_tenant AND k.term = u.word);
    IF unknown IS NOT NULL THEN
        -- the words left as typed: since 0.7.0 (#11 round 6b) forms of common words too, the same function
        real_words := rag._real_words(ARRAY(
            SELECT u FROM pg_catalog.unnest(unknown) AS u WHERE pg_catalog.length(u) BETWEEN 4 AND 40
        ));
    END IF;
    SELECT coalesce(pg_catalog.string_agg(coalesce(fix.term, w.word), ' ' ORDER BY w.n), '') INTO corrected
    FROM pg_catalog.unnest(words) WITH ORDINALITY AS w (word, n)
    LEFT JOIN LATERAL (
        SELECT t.term FROM rag.term AS t
        WHERE pg_catalog.length(w.word) BETWEEN 4 AND 40 AND w.word !~ '^[0-9_]+$'
            AND w.word = ANY (unknown) AND NOT (w.word = ANY (real_words))
            AND t.tenant = p_tenant AND t.term OPERATOR(public.%) w.word
            AND public.similarity(t.term, w.word) >= min_similarity
            AND public.levenshtein_less_equal(t.term, w.word, 2)
                <= CASE WHEN pg_catalog.length(w.word) <= 5 THEN 1 ELSE 2 END
        ORDER BY public.levenshtein_less_equal(t.term, w.word, 2), public.similarity(t.term, w.word) DESC,
            t.term
        LIMIT 1
    ) AS fix ON true;
    RETURN corrected;
END
$fn$
"""


def typos(question: str) -> list[str]:
    """The question with one letter dropped, doubled or two swapped in each of its words of 5+ letters."""
    out = []
    for w in {w for w in question.replace("?", " ").replace(",", " ").split() if w.isalpha() and len(w) >= 5}:
        for bad in (w[:2] + w[3:], w[:3] + w[3] + w[3:], w[:1] + w[2] + w[1] + w[3:]):
            out.append(question.replace(w, bad, 1))
    return out


def test_spelling_correction_through_rag_word_corrects_the_dev_set_as_before(conn, chapters):
    """rag.word (each distinct word once, its own trigram index) gives every dev question, and every one of
    its one-letter typos, the same correction as the old scan of the tenant's rag.term rows; a new word of
    an ingest reaches rag.word through the trigger, and the rebuild makes the same table."""
    from conftest import CHAPTERS_TENANT

    qs = [
        json.loads(line)["question"] for line in (ROOT / "eval" / "pgdocs-dev.jsonl").read_text().splitlines()
    ]
    variants = [v for q in qs for v in [q, *typos(q)]]
    assert len(variants) > 1000
    conn.execute(OLD_CORRECT)
    sql = "SELECT rag._correct_question(%s, %s, rag._params()), pg_temp.old_correct(%s, %s, rag._params())"
    changed = 0
    for v in variants:
        new, old = conn.execute(sql, (CHAPTERS_TENANT, v, CHAPTERS_TENANT, v)).fetchone()
        assert new == old, v
        changed += (
            new != conn.execute("SELECT rag._correct_question('no-such', %s, '{}')", (v,)).fetchone()[0]
        )
    assert changed > 300  # many typos were corrected, not merely left as they were
    # every word of rag.term is in rag.word, and nothing else
    missing = conn.execute(
        "SELECT (SELECT count(DISTINCT term) FROM rag.term), (SELECT count(*) FROM rag.word),"
        " (SELECT count(*) FROM rag.term t WHERE NOT EXISTS (SELECT FROM rag.word w WHERE w.word = t.term))"
    ).fetchone()
    assert missing[0] == missing[1] and missing[2] == 0
    conn.execute("SELECT rag.create_tenant('newwords')")
    conn.execute("SELECT * FROM rag.ingest('newwords', 'n.md', '# Zyxwvutsrq\n\nThe qwertyuiop setting.')")
    q = "what is the qwertyuio setting"
    assert conn.execute("SELECT rag._correct_question('newwords', %s, rag._params())", (q,)).fetchone()[
        0
    ] == ("what is the qwertyuiop setting")
    words = conn.execute("SELECT array_agg(word ORDER BY word) FROM rag.word").fetchone()[0]
    conn.execute("SELECT rag._rebuild_retrieval_stats()")
    assert conn.execute("SELECT array_agg(word ORDER BY word) FROM rag.word").fetchone()[0] == words


def test_spelling_correction_suggests_only_the_tenants_own_words(conn):
    """rag.word holds every tenant's words: a reader cannot read it nor run the correction as itself, and a
    word of another tenant is never suggested (the corrected question is shown to the asker)."""
    conn.execute("SELECT rag.create_tenant('wa')")
    conn.execute("SELECT rag.create_tenant('wb')")
    conn.execute("SELECT * FROM rag.ingest('wa', 'a.md', '# Launch\n\nThe launch code is pelicanorange.')")
    conn.execute("SELECT * FROM rag.ingest('wb', 'b.md', '# Notes\n\nThe notes of the other tenant.')")
    role = "spell_reader_" + uuid.uuid4().hex[:6]
    conn.execute(f"CREATE ROLE {role} IN ROLE pgcite_reader")
    conn.execute("SELECT rag.grant_tenant('wb', %s)", (role,))
    conn.execute("SELECT rag.grant_tenant('wa', current_user::regrole)")
    q = "what is pelicanorang"
    assert (
        conn.execute("SELECT rag.correct_question(%s, 'wa')", (q,)).fetchone()[0] == "what is pelicanorange"
    )
    conn.execute(f"SET LOCAL ROLE {role}")
    assert conn.execute("SELECT rag.correct_question(%s, 'wb')", (q,)).fetchone()[0] == q
    rows = conn.execute("SELECT content FROM rag.retrieve(%s, 'wb', 3)", (q,)).fetchall()
    assert len(rows) == 1 and "pelican" not in rows[0][0]  # retrieval corrects as the owner, for wb alone
    for sql, state in (
        ("SELECT rag.correct_question(%s, 'wa')", "42501"),  # not a member of wa
        ("SELECT count(*) FROM rag.word WHERE word = %s", "42501"),
        ("SELECT rag._correct_question('wa', %s, rag._params())", "42501"),
    ):
        conn.execute("SAVEPOINT s")
        try:
            conn.execute(sql, (q,) if "%s" in sql else ())
        except psycopg.Error as e:
            assert e.sqlstate == state, sql
        else:
            raise AssertionError(f"no error: {sql}")
        conn.execute("ROLLBACK TO SAVEPOINT s")


def test_candidates_equal_their_unplanned_result_on_every_path_past_plan_caching(conn):
    """rag._candidates plans each leg for its call and its fusing statement once per connection (generic):
    every row and column equals what a call with no cached plan (DISCARD PLANS before it) returns, for
    tenants on each path (own indexes, the table-wide HNSW index, exact search; full text through the tenant's
    own GIN index or the table's, a stopword-only and a negated question) asked interleaved on one connection
    past PL/pgSQL's five-call switch to generic plans; a tenant searched exactly never reads an HNSW index,
    and the caller's plan_cache_mode is unchanged."""
    conn.execute("SELECT rag.set_config('exact_search_limit', '30')")
    conn.execute("SELECT rag.create_tenant('pl_own')")
    conn.execute("SELECT * FROM rag.ingest('pl_own', 'a.md', %s)", (doc(45, "checkpoint"),))
    n = conn.execute("SELECT rag._live_chunks('pl_own')").fetchone()[0]
    assert len(conn.execute("SELECT * FROM rag._index_tenants(%s, 'pl_own')", (n,)).fetchall()) == 3
    conn.execute("SELECT rag.create_tenant('pl_ann')")
    conn.execute("SELECT * FROM rag.ingest('pl_ann', 'a.md', %s)", (doc(40, "vacuum"),))
    conn.execute("SELECT rag.create_tenant('pl_small')")
    conn.execute("SELECT * FROM rag.ingest('pl_small', 'a.md', %s)", (doc(6, "wraparound"),))
    live = dict(conn.execute("SELECT tenant, live_chunks FROM rag.tenant_stat").fetchall())
    assert live["pl_ann"] > 30 and live["pl_small"] <= 30
    exact_tenants = {t for t, n in live.items() if n <= 30}
    questions = [Q, WRAP, "checkpoint topic 3", "vacuum -checkpoint notes", "the of and"]
    qemb = {q: conn.execute("SELECT rag.embed(%s)::text", (q,)).fetchone()[0] for q in questions}
    tenants = ["pl_own", "tiny", "pl_ann", "pl_small"]
    sql = "SELECT * FROM rag._candidates(%s, %s, %s::vector, 40, rag._params())"

    def call(t: str, q: str) -> list:
        return conn.execute(sql, (t, q, qemb[q])).fetchall()

    unplanned = {}
    for t in tenants:
        for q in questions:
            conn.execute("DISCARD PLANS")
            unplanned[t, q] = call(t, q)
    assert all(unplanned[t, Q] for t in tenants)  # every tenant has candidates
    assert any(r[6] is not None for r in unplanned["pl_own", WRAP] + unplanned["tiny", WRAP])  # full text
    assert any(r[8] is not None for r in unplanned["pl_own", "checkpoint topic 3"])  # titles
    conn.execute("SET LOCAL plan_cache_mode = auto")
    for i in range(7):
        for t in tenants:
            for q in questions:
                if i == 6 and t in exact_tenants:
                    rows, seen = plans(conn, sql, (t, q, qemb[q]))
                    hnsw = ("Index Scan using chunk_hnsw_", "Index Scan using chunk_embedding_hnsw_idx")
                    assert seen and not any(h in p for p in seen for h in hnsw), (t, q)
                else:
                    rows = call(t, q)
                assert rows == unplanned[t, q], (i, t, q)
    assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "auto"


def test_ann_search_depth_goes_past_ef_search_for_the_largest_tenants_and_is_the_functions_own(conn):
    """The vector leg's HNSW search (measured at 1M chunks, docs/BENCHMARKS.md 0.9.0): ef_search 400 and
    ef / 2 rows for tenants up to 100,000 chunks; above, ef_search 800 and (through the tenant's own index)
    1.5 x ef rows, so pgvector's iterative scan searches on past the first ef candidates (clusters of
    near-copies the first pass misses); 600 (900 rows) through an own index built with ef_construction 200,
    and 200 (5 x depth, ef / 2 rows) through such an index of a tenant up to 100,000 chunks.
    Every row count is at least the leg's depth, and within the scan's own hnsw.max_scan_tuples (pinned on
    rag._candidates with iterative_scan and ef_search, so no setting of the caller's session shortens the
    search)."""
    got = conn.execute(
        "SELECT n, d, dense, rag._ann_ef(n, d, dense), rag._ann_fetch(n, d, true, dense), "
        "rag._ann_fetch(n, d, false, dense) "
        "FROM unnest(%s::bigint[]) AS n, unnest(%s::integer[]) AS d, unnest('{f,t}'::boolean[]) AS dense "
        "ORDER BY n, d, dense",
        ([40, 10000, 100000, 100001, 350000, 10**9], [40, 80, 400]),
    ).fetchall()
    table = {(n, d, dense): (ef, fetch) for n, d, dense, ef, fetch, _ in got}
    # through the table's index (a tenant filter) the fetch stays ef / 2 of the default graph's search
    assert all(wide == table[n, d, False][0] // 2 for n, d, _, _, _, wide in got)
    assert table[(10000, 40, False)] == table[(100000, 40, False)] == (400, 200)
    # a dense own graph up to 100,000 chunks: half the search (recall 1.000 at 10,000 chunks, session 14)
    assert table[(10000, 40, True)] == table[(100000, 40, True)] == (200, 100)
    assert table[(10000, 80, True)] == (400, 200) and table[(10000, 400, True)] == (1000, 500)
    assert table[(100001, 40, False)] == (800, 1200)
    assert table[(350000, 40, False)] == (800, 1200)
    assert table[(350000, 40, True)] == (600, 900)
    assert table[(350000, 400, False)] == table[(350000, 400, True)] == (1000, 1500)  # pgvector's largest
    config = dict(
        s.split("=", 1)
        for s in conn.execute(
            "SELECT proconfig FROM pg_proc"
            " WHERE oid = 'rag._candidates(text, text, vector, integer, jsonb, text)'::regprocedure"
        ).fetchone()[0]
    )
    assert config["hnsw.iterative_scan"] == "relaxed_order"
    for (n, d, _), (ef, fetch) in table.items():
        assert 1 <= ef <= 1000, (n, d)
        assert d <= fetch <= int(config["hnsw.max_scan_tuples"]), (n, d)
        assert (fetch > ef) == (n > 100000), (n, d)
    body = conn.execute(
        "SELECT prosrc FROM pg_proc "
        "WHERE oid = 'rag._candidates(text, text, vector, integer, jsonb, text)'::regprocedure"
    ).fetchone()[0]
    assert "USING qemb, rag._ann_rows(n_active, ef, own_ann)" in body
    assert "ef := rag._ann_search(n_active, p_depth, own_dense, tuned_ef)" in body
    assert "own_dense := rag._index_is_dense(pg_catalog.to_regclass('rag.' || own_index))" in body


def test_every_tenants_own_graph_is_built_denser_and_read_back(conn):
    """rag._index_tenants builds every tenant's own HNSW index WITH (ef_construction = 200), and
    rag._index_is_dense tells such an index from one built with the default, which keeps the search it was
    measured with (an upgrade without a rebuild keeps its recall)."""
    for live in (1000, 100000, 100001):
        assert conn.execute("SELECT rag._hnsw_build_options(%s)", (live,)).fetchone()[0] == (
            " WITH (ef_construction = 200)"
        )
    body = conn.execute(
        "SELECT prosrc FROM pg_proc WHERE oid = 'rag._index_tenants(bigint, text)'::regprocedure"
    ).fetchone()[0]
    assert "rag._hnsw_build_options(st.live_chunks)" in body
    conn.execute("CREATE TABLE public.dense_probe (embedding vector(3))")
    try:
        for name, opts in (
            ("probe_default", ""),
            ("probe_64", " WITH (ef_construction = 64)"),
            ("probe_200", " WITH (ef_construction = 200)"),
        ):
            ddl = f"CREATE INDEX {name} ON public.dense_probe USING hnsw (embedding vector_cosine_ops){opts}"
            conn.execute(ddl)
        got = conn.execute(
            "SELECT rag._index_is_dense('public.probe_default'), rag._index_is_dense('public.probe_64'), "
            "rag._index_is_dense('public.probe_200')"
        ).fetchone()
        assert got == (False, False, True)
    finally:
        conn.execute("DROP TABLE public.dense_probe")


LADDER = [200, 300, 400, 600, 800, 1000]


def test_own_graphs_search_is_measured_on_it_and_read_back_while_it_is_that_graph(conn):
    """rag._index_tenants measures every HNSW graph it builds (rag._tune_ann): recall@10 of the ANN query
    against exact search for probe sentences at each ef_search of the ladder, the smallest that reaches the
    target kept in rag.tenant_ann; rag._candidates then searches with it (never under 5 x depth) while the
    index is the graph measured, and falls back to the size rule once it is rebuilt. The rows are the same."""
    role = "tun_reader_" + uuid.uuid4().hex[:6]
    conn.execute("SELECT rag.create_tenant('tun')")
    conn.execute("SELECT * FROM rag.ingest('tun', 'a.md', %s)", (doc(60, "vacuum"),))
    conn.execute(f"CREATE ROLE {role} IN ROLE pgcite_reader")
    conn.execute("SELECT rag.grant_tenant('tun', %s)", (role,))
    sql = "SELECT chunk_id, rank, distance, fused_score FROM rag.retrieve(%s, 'tun', 10)"
    exact = conn.execute(sql, (Q,)).fetchall()
    n = conn.execute("SELECT rag._live_chunks('tun')").fetchone()[0]
    index = conn.execute("SELECT rag._tenant_index_name('tun')").fetchone()[0]
    assert conn.execute("SELECT count(*) FROM rag.tenant_ann WHERE tenant = 'tun'").fetchone()[0] == 0
    conn.execute("SELECT * FROM rag._index_tenants(%s, 'tun')", (n,)).fetchall()
    row = conn.execute(
        "SELECT index_name, live_chunks, ef_search, recall, min_recall, probes, target, curve "
        "FROM rag.tenant_ann WHERE tenant = 'tun'"
    ).fetchone()
    assert row is not None, "the new graph was not measured"
    name, live, ef, recall, min_recall, probes, target, curve = row
    assert (name, live, probes, target) == (index, n, min(n, 100), 0.995)
    assert sorted(int(k) for k in curve) == LADDER
    # the smallest ef_search of the ladder whose mean recall reaches the target, and its figures
    assert ef == min(e for e in LADDER if curve[str(e)] >= target)
    assert round(recall, 4) == curve[str(ef)] and 0 <= min_recall <= recall <= 1
    assert conn.execute("SELECT rag._tuned_ef('tun', %s)", (index,)).fetchone()[0] == ef
    # the vector leg reads it: at least 5 x depth, at most pgvector's 1,000; the size rule when unmeasured
    got = conn.execute(
        "SELECT rag._ann_search(%s, 40, true, 300), rag._ann_search(%s, 40, true, 100), "
        "rag._ann_search(%s, 400, true, 300), rag._ann_search(%s, 40, true, NULL), rag._ann_ef(%s, 40, true)",
        (n, n, n, n, n),
    ).fetchone()
    assert got[:3] == (300, 200, 1000) and got[3] == got[4]
    body = conn.execute(
        "SELECT prosrc FROM pg_proc "
        "WHERE oid = 'rag._candidates(text, text, vector, integer, jsonb, text)'::regprocedure"
    ).fetchone()[0]
    assert "tuned_ef := rag._tuned_ef(v_tenant, own_index)" in body
    assert "ef := rag._ann_search(n_active, p_depth, own_dense, tuned_ef)" in body

    def as_reader() -> list:
        conn.execute(f"SET LOCAL ROLE {role}")
        try:
            return conn.execute(sql, (Q,)).fetchall()
        finally:
            conn.execute("RESET ROLE")

    for _ in range(7):  # past PL/pgSQL's five-call plan caching
        assert as_reader() == exact
    # another graph under the same name is not the one measured: the size rule until measured again
    conn.execute(f"REINDEX INDEX rag.{index}")
    assert conn.execute("SELECT rag._tuned_ef('tun', %s)", (index,)).fetchone()[0] is None
    assert as_reader() == exact
    again = conn.execute("SELECT tenant, index_name, ef_search, probes FROM rag._tune_ann('tun')").fetchall()
    assert again == [("tun", index, ef, min(n, 100))]
    assert conn.execute("SELECT rag._tuned_ef('tun', %s)", (index,)).fetchone()[0] == ef
    conn.execute(f"DROP INDEX rag.{index}")
    assert conn.execute("SELECT rag._tuned_ef('tun', %s)", (index,)).fetchone()[0] is None
    assert conn.execute("SELECT count(*) FROM rag._tune_ann('tun')").fetchone()[0] == 0  # no graph, nothing
    assert as_reader() == exact  # exact search again


@pytest.mark.parametrize(
    "args",
    ["NULL, 0", "NULL, 1001", "NULL, NULL", "NULL, 10, 0", "NULL, 10, 1.01", "NULL, 10, NULL"],
)
def test_tune_ann_rejects_bad_probes_and_targets(conn, args):
    try:
        conn.execute(f"SELECT * FROM rag._tune_ann({args})")
    except psycopg.Error as e:
        assert e.sqlstate == "22023", e
    else:
        raise AssertionError("no error")


def test_a_reader_can_neither_tune_nor_read_the_measured_search(conn):
    role = "tun2_reader_" + uuid.uuid4().hex[:6]
    conn.execute("SELECT rag.create_tenant('tun2')")
    conn.execute(f"CREATE ROLE {role} IN ROLE pgcite_reader")
    conn.execute("SELECT rag.grant_tenant('tun2', %s)", (role,))
    for stmt in (
        "SELECT * FROM rag._tune_ann('tun2')",
        "SELECT count(*) FROM rag.tenant_ann",
        "SELECT rag._tuned_ef('tun2', 'x')",
    ):
        conn.execute("SAVEPOINT s")
        conn.execute(f"SET LOCAL ROLE {role}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(stmt)
        conn.execute("ROLLBACK TO SAVEPOINT s")
