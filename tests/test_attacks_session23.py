"""Session 23 review (64730aa..5de38b2), as hostile tenant roles (a reader and a writer of tenant alpha, a
writer of tenant bravo):

1. rag.verify calls rag._quote_span (the white-space-tolerant lookup) only for a quote strpos does not find
   as written (OFFSET 0 keeps `x.exact = 0` a one-time filter). Held: a reader's crafted citations (quotes
   found as written, the same with tabs, newlines, no-break or ideographic spaces, only with other white
   space, twice in the chunk, blank, NULL, of another tenant's chunk, of a chunk not retrieved, ids that are
   not numbers, duplicates) give the citations, offsets, status and answer of a Python reference computed
   from the chunk's text, and those of rag.verify as it was at 64730aa (400 random quotes too);
   rag._quote_span runs exactly for the quotes not found as written (it ran for all before); bravo's chunk
   is never verified nor its text returned; 200 exact quotes against a chunk at max_chunk_bytes cost ~0.03 s
   of CPU (as much as 200 whose white space differs before the change, ~2.5 s); those stay linear in their
   number. (A no-break space is not \\s in this database's C.UTF-8 locale: a quote whose blanks are no-break
   spaces is dropped, before the change as after.)
2. rag._sentence_scores no longer returns quote and overlap and reads no chunk content; a chunk stored
   without sentences (rag.store_document) has its sentences split and embedded at ask time, and their content
   words taken from the `missing` JSON. Held: spans, terms, sims and scores of such live chunks (repeated
   sentences, unicode, astral characters, one-letter sentences), alone, several at once, mixed with stored
   ones, repeated in p_ids or mixed with another tenant's chunk, equal those of the same text ingested with
   its sentences stored (rag.ingest), per chunk, within 1e-5, with no duplicate span, and those of
   rag._sentence_scores at 64730aa less its two keys; a reader's rag.ask on the live chunks gives the answer
   and quotes bravo's rag.ask gives on the stored copy, cut verbatim from alpha's chunks.
3. rag._sentence_scores and rag._sentence_vectors stay pgcite_owner's only (42501 for every tenant role and
   the admin role); rag._quote_span stays callable by readers (rag.verify runs as its caller) and nobody else.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import uuid

import psycopg
import pytest
from conftest import ROOT, assert_verbatim, backend_cost, connect, fails, two_tenant_database, vector_values

SFX = uuid.uuid4().hex[:6]
R = {k: f"s23_{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
BEFORE = "64730aa"
TRIM = " \t\n\r\f\x0b"
# candidates for white space; which of them PostgreSQL's \s matches is asked of the database (white_chars)
WHITE_CANDIDATES = " \t\n\r\f\x0b\u00a0\u3000\u2003\u2028\u1680\u0085\u200b\ufeff"

# The chunk the verify tests cite (stored as is by rag.store_document): sentences written with other white
# space before they are written as such, a sentence twice, characters a regular expression would read,
# unicode white space.
VERIFY_TEXT = (
    "Kettles boil water quickly.  The quick brown fox\tjumps over\nthe lazy dog. "
    "Tea needs water at ninety degrees. The quick brown fox jumps over the lazy dog. "
    "Café\u3000crème is served hot.\u00a0Milk\u2003foams well. "
    "Steam rises fast. Steam rises fast. "
    "Line one\r\nline two\x0bline three\fline four. "
    "Brackets [1] and (parens) and $dollars* stay literal. 42 is the answer. "
    "Ümlaut wörds and 日本語の文 and 🫖 teapots sit here."
)

# The text whose sentences are embedded at ask time (rag.store_document without sentences) and stored
# (rag.ingest): a sentence repeated, one-letter and one-word sentences, accents, CJK and astral characters.
KETTLE = """# Kettle care

The kettle boils a litre of water in three minutes. Ok. The kettle boils a litre of water in three minutes.
Descale the kettle monthly with citric acid. Go! A. B. C.

Café crème needs milk steamed to sixty degrees — never boiling. Ünïcödé labels: 日本語の説明です。
The 🫖 teapot steeps green tea for two minutes. 🫖🫖. Ok.

## Storage

Store the kettle empty and dry. Yes. Store the kettle empty and dry. Wipe the base before storing it.
"""
STORED_ONLY = """# Bicycle care

Oil the bicycle chain every month. Pump the tyres weekly. The frame is made of steel.
"""


def store(w: psycopg.Connection, tenant: str, key: str, items: list[dict]) -> list[int]:
    """rag.store_document of items as the writer w; the new chunks' ids in order."""
    w.execute("SELECT * FROM rag.store_document(%s, %s, %s)", (tenant, key, json.dumps(items)))
    return [
        r[0]
        for r in w.execute(
            "SELECT chunk_id FROM rag.chunk WHERE tenant = %s AND doc_key = %s AND retired_at IS NULL"
            " ORDER BY chunk_index",
            (tenant, key),
        )
    ]


@pytest.fixture(scope="module")
def adb(pg):
    """The two tenants' database; alpha holds VERIFY_TEXT (store_document), the live copy of KETTLE's chunks
    (store_document, no sentences) and STORED_ONLY (rag.ingest); bravo holds KETTLE (rag.ingest)."""
    # a lower gate threshold, so that more of KETTLE's questions are answered (compared below)
    gen = two_tenant_database(pg, f"pgcite_s23_{SFX}", R, {"min_score": "0.4"})
    name = next(gen)
    ids: dict = {}
    with connect(pg, name, R["writer"]) as w, connect(pg, name, R["bravo"]) as b:
        emb = vector_values(
            w.execute("SELECT rag.embed('Kettles and the quick brown fox.')::text").fetchone()[0]
        )
        ids["verify"] = store(w, "alpha", "verify.md", [{"content": VERIFY_TEXT, "embedding": emb}])[0]
        b.execute("SELECT * FROM rag.ingest('bravo', 'kettle.md', %s, 'markdown')", (KETTLE,))
        with pg.admin(name) as a:  # (a writer may not read the chunks' embeddings)
            rows = a.execute(
                "SELECT chunk_id, content, title, embedding::text FROM rag.chunk"
                " WHERE tenant = 'bravo' AND doc_key = 'kettle.md' ORDER BY chunk_index"
            ).fetchall()
        ids["bravo_kettle"] = [r[0] for r in rows]
        items = [{"content": c, "title": t, "embedding": vector_values(e)} for _, c, t, e in rows]
        ids["live"] = store(w, "alpha", "kettle-live.md", items)
        w.execute("SELECT * FROM rag.ingest('alpha', 'bicycle.md', %s, 'markdown')", (STORED_ONLY,))
        ids["stored"] = [
            r[0]
            for r in w.execute(
                "SELECT chunk_id FROM rag.chunk WHERE tenant = 'alpha' AND doc_key = 'bicycle.md' ORDER BY 1"
            )
        ]
    with pg.admin(name) as a:
        ids["bravo"] = a.execute(
            "SELECT chunk_id FROM rag.chunk WHERE tenant = 'bravo' AND doc_key = 'b.md'"
        ).fetchone()[0]
        ids["alpha_doc"] = [
            r[0]
            for r in a.execute("SELECT chunk_id FROM rag.chunk WHERE tenant = 'alpha' AND doc_key = 'a.md'")
        ]
        secret = a.execute("SELECT content FROM rag.chunk WHERE chunk_id = %s", (ids["bravo"],)).fetchone()[0]
        ids["bravo_secret"] = secret
    assert len(ids["live"]) >= 2, ids  # the two sections of KETTLE
    yield name, ids
    next(gen, None)


# ---------------------------------------------------------------- rag.verify against a reference
def white_chars(c: psycopg.Connection) -> str:
    """The candidates PostgreSQL's regular expression class \\s matches in this database."""
    got = c.execute(
        "SELECT string_agg(x, '' ORDER BY o) FROM unnest(%s::text[]) WITH ORDINALITY AS u (x, o)"
        " WHERE x ~ '\\s'",
        (list(WHITE_CANDIDATES),),
    ).fetchone()[0]
    assert set(" \t\n\r\f\x0b") <= set(got), got
    return got


def _text(v) -> str | None:
    """What PostgreSQL's ->> gives for a JSON value."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return json.dumps(v)


def _digits(v, most: int) -> int | None:
    t = _text(v)
    return int(t) if t is not None and re.fullmatch(f"[0-9]{{1,{most}}}", t) else None


def ref_span(content: str, quote: str, white: str) -> tuple[int, int] | None:
    """(start, end), 0-based, of a quote in a chunk: trimmed of blanks, tabs and line ends; its first
    occurrence as written, else the first occurrence with any run of white space (\\s) standing for any other;
    None for none."""
    t = quote.strip(TRIM)
    if not t:
        return None
    i = content.find(t)
    if i >= 0:
        return i, i + len(t)
    if len(t) > 4000:
        return None
    w = "[" + re.escape(white) + "]+"
    m = re.search(w.join(re.escape(p) for p in re.split(w, t)), content)
    return m.span() if m else None


def ref_verify(answer: str, cited: list, retrieved: list[int], visible: dict[int, str], white: str):
    """(answer, [(n, chunk_id, quote, quote_start, quote_end)], status) as rag.verify should give them, and
    the number of quotes that need the white-space-tolerant lookup (not found as written)."""
    marks = {m[1] for m in re.finditer(r"\[([0-9]{1,6})\]", answer or "") if m[1] == str(int(m[1]))}
    located, flexible = [], 0
    for o, c in enumerate(cited):
        n, cid, q = _digits(c.get("n"), 6), _digits(c.get("chunk_id"), 18), _text(c.get("quote"))
        if n is None or q is None or not q.strip(" ") or cid not in retrieved or cid not in visible:
            continue
        content = visible[cid]
        t = q.strip(TRIM)
        if t and content.find(t) < 0:
            flexible += 1
        span = ref_span(content, q, white)
        if span and span[1] > span[0] and str(n) in marks:
            located.append((n, o, cid, content[span[0] : span[1]], span[0], span[1]))
    located.sort(key=lambda x: (x[0], x[1]))
    kept = {str(x[0]) for x in located}
    if not located:
        return (None, [], "abstained"), flexible

    def marker(m):
        return "" if m[2] == str(int(m[2])) and m[2] not in kept else m[0]

    text = re.sub(r"(\s*)\[([0-9]{1,6})\]", marker, answer).strip(" ")
    return (text, [(n, cid, q, s, e) for n, _, cid, q, s, e in located], "answered"), flexible


def _got(row):
    answer, citations, status, _ = row
    return (
        answer,
        [(c["n"], c["chunk_id"], c["quote"], c["quote_start"], c["quote_end"]) for c in citations],
        status,
    )


VERIFY = "SELECT answer, citations, status, reason FROM rag.verify(%s, %s, %s)"


def crafted_quotes(white: str) -> list:
    """Quotes for VERIFY_TEXT: as written, with their white space changed to each kind, only with other white
    space, twice, metacharacters, blank and NULL."""
    fox = "The quick brown fox jumps over the lazy dog."
    quotes = [
        fox,  # as written (its second occurrence; the first has a tab and a newline)
        "The quick brown fox\tjumps over\nthe lazy dog.",  # the first, as written
        "The  quick brown fox jumps over the lazy dog.",  # only with other white space: the first
        "  Tea needs water at ninety degrees.\n",  # trimmed, as written
        "Tea\tneeds\nwater\r\nat ninety\x0bdegrees.",
        "Steam rises fast.",  # twice: the first
        "Steam  rises fast.",
        "Café crème is served hot.",
        "served hot. Milk foams well.",
        "line two line three line four.",
        "Line one line two",
        "(parens) and $dollars* stay literal.",
        "(parens)  and\t$dollars*  stay literal.",
        "Brackets [1] and",
        "🫖 teapots sit here.",
        "日本語の文 and 🫖",
        "Ümlaut\twörds",
        "\u3000Tea needs water",
        "fast. Steam",
        "not in the chunk at all",
        "The quick brown fox jumps over the lazy cat.",
        "",
        "   ",
        "\t\n",
        None,
        42,
    ]
    for ch in white + "\u00a0\u200b":  # each kind of white space (and two that may not be)
        quotes.append(fox.replace(" ", ch))
        quotes.append(("Tea needs water at ninety degrees. " + fox).replace(" ", ch))
    return quotes


def test_reader_verify_matches_a_reference_for_crafted_citations(pg, adb):
    """A reader's rag.verify of crafted citations (crafted_quotes, then all at once with ids of every kind,
    another tenant's chunk, chunks not retrieved, duplicates) gives the answer, citations, offsets and status
    of ref_verify; bravo's chunk is never verified nor its text returned."""
    db, ids = adb
    cid = ids["verify"]
    with connect(pg, db, R["reader"]) as r:
        white = white_chars(r)
        content = r.execute("SELECT content FROM rag.chunk WHERE chunk_id = %s", (cid,)).fetchone()[0]
        assert content == VERIFY_TEXT
        retrieved = [cid, ids["bravo"], *ids["alpha_doc"]]
        # what the reader may read of them (row level security: not bravo's)
        visible = dict(
            r.execute("SELECT chunk_id, content FROM rag.chunk WHERE chunk_id = ANY(%s)", (retrieved,))
        )
        assert set(visible) == {cid, *ids["alpha_doc"]}
        quotes = crafted_quotes(white)
        answered, single = 0, []
        for q in quotes:
            cited = [{"n": 1, "chunk_id": cid, "quote": q}]
            answer = "A claim [1]. Another [2]."
            got = _got(r.execute(VERIFY, (answer, json.dumps(cited), retrieved)).fetchone())
            expect, _ = ref_verify(answer, cited, retrieved, visible, white)
            assert got == expect, (q, got, expect)
            answered += got[2] == "answered"
            single.append(got)
            for _, _, quote, s, e in got[1]:
                assert content[s:e] == quote
        # the reference is not vacuous: most are found, some with other white space, some not at all
        assert answered >= 20 and len(quotes) - answered >= 6, (answered, len(quotes))
        fox = "The quick brown fox jumps over the lazy dog."
        first = ref_span(content, "The  quick brown fox jumps over the lazy dog.", white)
        assert first[0] < content.find(fox) and content[first[0] : first[1]].startswith(
            "The quick brown fox\t"
        )
        assert ref_span(content, "Steam rises fast.", white)[0] == content.find("Steam rises fast.")
        # each white space \s matches stands for a blank: the fox with it is found where the fox with two
        # blanks is; one it does not match (here the no-break space) is not white space: that quote is dropped
        kinds = set()
        for q, got in zip(quotes, single, strict=True):
            if isinstance(q, str) and len(q) == len(fox) and q != fox and q.replace(q[3], " ") == fox:
                kinds.add(q[3])
                if q[3] in white:
                    assert got[1] == [(1, cid, content[first[0] : first[1]], *first)], repr(q[3])
                else:
                    assert got[2] == "abstained", repr(q[3])
        assert kinds == set(white + "\u00a0\u200b") - {" "}

        # all of them at once, numbered, with other tenants' and unretrieved chunks and ids of every kind
        cited = [{"n": i + 1, "chunk_id": cid, "quote": q} for i, q in enumerate(quotes)]
        cited += [
            {"n": len(cited) + 1, "chunk_id": ids["bravo"], "quote": ids["bravo_secret"]},
            {"n": len(cited) + 2, "chunk_id": ids["bravo"], "quote": "pelican-orange-42"},
            *({"n": len(cited) + 3, "chunk_id": x, "quote": "alpha  team"} for x in ids["alpha_doc"]),
            *({"n": len(cited) + 4, "chunk_id": x, "quote": "B-tree index"} for x in ids["alpha_doc"]),
            {"n": 1, "chunk_id": str(cid), "quote": "Steam rises fast."},  # a string of digits: an id
            {"n": "2", "chunk_id": cid, "quote": "Steam rises fast."},
            {"n": "03", "chunk_id": cid, "quote": "Kettles boil"},  # n 3
            {"n": 1, "chunk_id": str(cid) + "x", "quote": "Kettles boil"},
            {"n": 1, "chunk_id": f" {cid}", "quote": "Kettles boil"},
            {"n": 1, "chunk_id": -cid, "quote": "Kettles boil"},
            {"n": 1, "chunk_id": cid + 0.5, "quote": "Kettles boil"},
            {"n": 1, "chunk_id": "1" * 19, "quote": "Kettles boil"},
            {"n": 1, "chunk_id": None, "quote": "Kettles boil"},
            {"n": 1, "chunk_id": True, "quote": "Kettles boil"},
            {"n": 1, "chunk_id": [cid], "quote": "Kettles boil"},
            {"n": 1.5, "chunk_id": cid, "quote": "Kettles boil"},
            {"n": -1, "chunk_id": cid, "quote": "Kettles boil"},
            {"n": 1234567, "chunk_id": cid, "quote": "Kettles boil"},
            {"n": "x", "chunk_id": cid, "quote": "Kettles boil"},
            {"chunk_id": cid, "quote": "Kettles boil"},
            {"n": 5, "chunk_id": cid},
        ]
        cited += cited[:6]  # duplicates
        # a chunk the reader may read but that was not retrieved
        cited.append({"n": 7, "chunk_id": ids["stored"][0], "quote": "bicycle chain"})
        answer = " ".join(f"Claim {i} [{i}]." for i in range(1, len(cited) + 3)) + " Zero [0]. Padded [01]."
        got = _got(r.execute(VERIFY, (answer, json.dumps(cited), retrieved)).fetchone())
        expect, _ = ref_verify(answer, cited, retrieved, visible, white)
        assert got == expect
        assert len(got[1]) > 40
        # bravo's chunk is never verified, nor its text returned, even named in retrieved
        raw = r.execute(VERIFY, (answer, json.dumps(cited), retrieved)).fetchone()
        assert "pelican" not in json.dumps(raw, ensure_ascii=False)
        assert {c["chunk_id"] for c in raw[1]} == {cid, *ids["alpha_doc"]}
        docs = {cid: "verify.md", **{x: "a.md" for x in ids["alpha_doc"]}}
        assert all(c["doc_key"] == docs[c["chunk_id"]] for c in raw[1])
        only_bravo = [{"n": 1, "chunk_id": ids["bravo"], "quote": "pelican"}]
        raw = r.execute(VERIFY, ("Secret [1].", json.dumps(only_bravo), [ids["bravo"]])).fetchone()
        assert raw == (None, [], "abstained", "no_verifiable_quote")


def quote_span_calls(pg, db: str, role: str, calls: list[tuple]) -> list[tuple[tuple, int]]:
    """For each (fn, answer, cited, retrieved): the result of fn (rag.verify or its old copy) as `role` and
    the number of rag._quote_span calls it made (track_functions = 'all', set by the superuser, then SET ROLE:
    a tenant role may not set it)."""
    out = []
    with psycopg.connect(pg.dsn(db)) as c:
        c.execute("SET track_functions = 'all'")
        c.execute(f"SET ROLE {role}")
        for fn, answer, cited, retrieved in calls:
            n0 = c.execute(
                "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions"
                " WHERE schemaname = 'rag' AND funcname = '_quote_span'"
            ).fetchone()[0]
            row = c.execute(
                f"SELECT answer, citations, status, reason FROM {fn}(%s, %s, %s)",
                (answer, json.dumps(cited), retrieved),
            ).fetchone()
            n1 = c.execute(
                "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions"
                " WHERE schemaname = 'rag' AND funcname = '_quote_span'"
            ).fetchone()[0]
            out.append((row, n1 - n0))
        c.rollback()
    return out


def test_verify_calls_quote_span_only_for_quotes_not_found_as_written(pg, adb):
    """Counted by track_functions: one rag._quote_span call per quote of a retrieved, visible chunk that is
    not found as written; none for a quote found as written, a blank one, another tenant's chunk, or an id
    that is not one."""
    db, ids = adb
    cid = ids["verify"]
    with connect(pg, db, R["reader"]) as r:
        white = white_chars(r)
    quotes = crafted_quotes(white)
    retrieved = [cid, ids["bravo"]]
    answer = " ".join(f"Claim [{i}]." for i in range(1, len(quotes) + 2))
    calls = [("rag.verify", "Claim [1].", [{"n": 1, "chunk_id": cid, "quote": q}], retrieved) for q in quotes]
    everything = [{"n": i + 1, "chunk_id": cid, "quote": q} for i, q in enumerate(quotes)]
    everything += [
        {"n": 1, "chunk_id": ids["bravo"], "quote": "pelican orange"},
        {"n": 1, "chunk_id": ids["stored"][0], "quote": "bicycle  chain"},
        {"n": 1, "chunk_id": "x", "quote": "Steam  rises"},
    ]
    calls.append(("rag.verify", answer, everything, retrieved))
    results = quote_span_calls(pg, db, R["reader"], calls)
    visible = {cid: VERIFY_TEXT}
    total_flexible = 0
    for (_, ans, cited, retrieved_), (row, n) in zip(calls, results, strict=True):
        expect, flexible = ref_verify(ans, cited, retrieved_, visible, white)
        assert _got(row) == expect, cited
        assert n == flexible, (cited, n, flexible)
        total_flexible += flexible
    # not vacuous: many quotes are found as written, many are not
    exact = sum(1 for q in quotes if isinstance(q, str) and q.strip(TRIM) and q.strip(TRIM) in VERIFY_TEXT)
    assert exact >= 10 and total_flexible >= 20, (exact, total_flexible)


def _old_function(pg, db: str, path: str, name: str) -> bool:
    """Function rag.<name> as it was at 64730aa (its CREATE statement in `path`), created as s23old.<name>
    (the schema usable by the reader); False when this checkout has no git history."""
    try:
        src = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{BEFORE}:{path}"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    start = src.index(f"CREATE OR REPLACE FUNCTION rag.{name}(")
    body = src[start : src.index("$fn$;", start) + len("$fn$;")]
    with pg.admin(db) as a:
        a.execute("CREATE SCHEMA IF NOT EXISTS s23old")
        a.execute(body.replace(f"FUNCTION rag.{name}(", f"FUNCTION s23old.{name}(", 1))
        a.execute(f"GRANT USAGE ON SCHEMA s23old TO {R['reader']}")
    return True


def _fuzz_citations(rnd: random.Random, contents: dict[int, str], white: str, n: int) -> list[dict]:
    runs = [" ", "\t", "\n", "  ", " \n ", "\r\n", "\x0b", "\f", *white, "\u00a0"]
    ids = list(contents)
    out = []
    for _ in range(n):
        cid = rnd.choice(ids)
        content = contents[cid]
        a = rnd.randrange(len(content))
        q = content[a : rnd.randint(a, min(len(content), a + 80))]
        kind = rnd.random()
        if kind < 0.45:
            q = re.sub(r"\s+", lambda m: rnd.choice(runs), q)
        elif kind < 0.55:
            q = rnd.choice(runs) + q + rnd.choice(runs)
        elif kind < 0.6:
            q = q + "zq"
        out.append({"n": rnd.randint(1, 12), "chunk_id": cid, "quote": q})
    return out


def test_verify_gives_what_it_gave_before_the_change(pg, adb):
    """The same answers, citations, statuses and reasons as rag.verify at 64730aa for 400 random quotes cut
    from the chunks (white space changed, padded, spoiled), one by one and in batches, and the new one calls
    rag._quote_span only for the quotes not found as written (the old one for every quote)."""
    db, ids = adb
    if not _old_function(pg, db, "sql/core/060-verify.sql", "verify"):
        pytest.skip("no git history of this checkout")
    with connect(pg, db, R["reader"]) as r:
        white = white_chars(r)
        contents = dict(
            r.execute(
                "SELECT chunk_id, content FROM rag.chunk WHERE chunk_id = ANY(%s)",
                ([ids["verify"], *ids["live"], *ids["alpha_doc"]],),
            ).fetchall()
        )
    rnd = random.Random(23)
    cited = _fuzz_citations(rnd, contents, white, 400)
    retrieved = [*contents, ids["bravo"]]
    answer = " ".join(f"Claim {i} [{i}]." for i in range(1, 11)) + " Nested [5[2]] and [1[1[3]]]."
    calls = []
    for i in range(0, 400, 40):
        for fn in ("rag.verify", "s23old.verify"):
            calls.append((fn, answer, cited[i : i + 40], retrieved))
    for c in cited[:60]:
        for fn in ("rag.verify", "s23old.verify"):
            calls.append((fn, answer, [c], retrieved))
    results = quote_span_calls(pg, db, R["reader"], calls)
    flexible_total = cited_total = 0
    for k in range(0, len(calls), 2):
        (new, n_new), (old, n_old) = results[k], results[k + 1]
        batch = calls[k][2]
        assert new == old, batch
        # the citations and status of the reference (its answer text does not unnest markers)
        expect, flexible = ref_verify(answer, batch, retrieved, contents, white)
        assert _got(new)[1:] == expect[1:], batch
        assert n_new == flexible, (batch, n_new, flexible)
        # before: a call for every quote that is not blank
        assert n_old == sum(1 for c in batch if c["quote"].strip(" ")) >= n_new
        flexible_total += n_new
        cited_total += len(new[1])
    assert flexible_total > 50 and cited_total > 100, (flexible_total, cited_total)


# ---------------------------------------------------------------- cost of verify
def test_verify_of_many_quotes_at_max_chunk_bytes_is_cheap_and_linear(pg, adb):
    """200 exact quotes against a chunk at max_chunk_bytes: no rag._quote_span call, and a fraction of the
    CPU of 200 whose white space differs (each normalises the chunk's white space once: linear in their
    number)."""
    db, ids = adb
    with pg.admin(db) as a:
        limit = int(a.execute("SELECT rag._setting('max_chunk_bytes', 16384)").fetchone()[0])
    sentences, i = [], 0
    while len(" ".join(sentences).encode()) < limit - 60:
        sentences.append(f"Sentence {i} of the long chunk names widget w{i:04d} once.")
        i += 1
    content = " ".join(sentences)
    content += "." * (limit - len(content.encode()))
    assert len(content.encode()) == limit and len(sentences) > 250
    with connect(pg, db, R["writer"]) as w, connect(pg, db, R["reader"]) as r:
        emb = [((7 + j) % 11 - 5) / 10 for j in range(384)]
        cid = store(w, "alpha", "long.md", [{"content": content, "embedding": emb}])[0]
        try:
            picked = sentences[: 200 * (len(sentences) // 200) : len(sentences) // 200][:200]
            answer = " ".join(f"c [{k}]" for k in range(1, 201))
            exact = [{"n": k + 1, "chunk_id": cid, "quote": s} for k, s in enumerate(picked)]
            flex = [
                {"n": k + 1, "chunk_id": cid, "quote": s.replace(" ", "\t")} for k, s in enumerate(picked)
            ]
            for batch in (exact, flex[:5]):  # warm up (plans, the regular expressions' cache)
                r.execute(VERIFY, (answer, json.dumps(batch), [cid]))
            cpu = {}
            for name, batch, runs in (("exact", exact, 3), ("flex100", flex[:100], 1), ("flex200", flex, 1)):
                best = None
                for _ in range(runs):
                    t, _, rows = backend_cost(r, VERIFY, (answer, json.dumps(batch), [cid]))
                    best = t if best is None else min(best, t)
                cites = rows[0][1]
                assert rows[0][2] == "answered" and len(cites) == len(batch)
                assert [content[c["quote_start"] : c["quote_end"]] for c in cites] == picked[: len(batch)]
                cpu[name] = best
            calls = quote_span_calls(
                pg,
                db,
                R["reader"],
                [("rag.verify", answer, exact, [cid]), ("rag.verify", answer, flex[:20], [cid])],
            )
            assert [n for _, n in calls] == [0, 20]
            # over 4,000 characters: found as written only (rag._quote_span looks up none that long)
            long = content[:4500].strip()
            cited = [
                {"n": 1, "chunk_id": cid, "quote": long},
                {"n": 2, "chunk_id": cid, "quote": long.replace(" ", "\t")},
            ]
            (row, n), *_ = quote_span_calls(pg, db, R["reader"], [("rag.verify", answer, cited, [cid])])
            expect = ref_verify(answer, cited, [cid], {cid: content}, " ")[0][1]
            assert _got(row)[1] == expect and [x[0] for x in expect] == [1] and len(long) > 4000
            assert n == 1
        finally:
            w.execute("SELECT rag.delete_document('alpha', 'long.md')")
    # measured: exact 0.03 s (as much as flex200 before the change: rag._quote_span for every quote);
    # flex100 1.25 s, flex200 2.5 s (12 ms per rag._quote_span of a 16 kB chunk: three regexp_instr and a
    # regexp_replace over the whole chunk, as since session 22)
    assert cpu["exact"] < 0.1 * cpu["flex200"] + 0.05, cpu
    assert cpu["flex200"] < 2.5 * cpu["flex100"] + 0.1, cpu
    assert cpu["flex200"] < 10, cpu


# ---------------------------------------------------------------- live sentences
SCORES = "SELECT rag._sentence_scores(%s, rag.embed(%s), %s, %s::jsonb)"


def test_live_sentences_score_as_ingested_ones(pg, adb):
    """rag._sentence_scores (as the superuser: pgcite_owner's only) of KETTLE's chunks stored by an alpha
    writer without sentences (split and embedded now) equal those of the same chunks ingested with their
    sentences by bravo: per chunk, the same spans and terms (rag._content_terms of each span's text), sims
    and scores within 1e-5; alone, together, with a stored chunk, repeated in p_ids or mixed with bravo's."""
    db, ids = adb
    live, bravo, stored = ids["live"], ids["bravo_kettle"], ids["stored"]
    q = "How long does the kettle take to boil a litre of water?"
    with pg.admin(db) as a:
        counts = dict(
            a.execute(
                "SELECT c.chunk_id, (SELECT count(*) FROM rag.sentence AS s WHERE s.chunk_id = c.chunk_id)"
                " FROM rag.chunk AS c WHERE c.chunk_id = ANY(%s)",
                (live + bravo + stored,),
            ).fetchall()
        )
        assert all(counts[x] == 0 for x in live) and all(counts[x] > 0 for x in bravo + stored), counts
        contents = dict(
            a.execute(
                "SELECT chunk_id, content FROM rag.chunk WHERE chunk_id = ANY(%s)", (live + bravo + stored,)
            )
        )
        assert [contents[x] for x in live] == [contents[x] for x in bravo]
        tw = a.execute("SELECT rag._question_term_weights(%s, %s)::text", (q, live[0])).fetchone()[0]

        def scores(p_ids):
            got = a.execute(SCORES, (q, q, p_ids, tw)).fetchone()[0]
            assert got is not None, p_ids
            return got

        def by_chunk(scored):
            out: dict[int, list] = {}
            for s in scored:
                assert set(s) == {"chunk_id", "start", "end", "sim", "score", "terms"}, s
                out.setdefault(s["chunk_id"], []).append(s)
            return out

        def same(a_spans, b_spans):
            assert [(s["start"], s["end"], s["terms"]) for s in a_spans] == [
                (s["start"], s["end"], s["terms"]) for s in b_spans
            ]
            for x, y in zip(a_spans, b_spans, strict=True):
                assert x["sim"] == pytest.approx(y["sim"], abs=1e-5)
                assert x["score"] == pytest.approx(y["score"], abs=1e-5)

        alone = {x: scores([x]) for x in live + bravo + stored}
        for lv, bv in zip(live, bravo, strict=True):
            same(alone[lv], alone[bv])
            assert len(alone[lv]) >= 3
            # each span's terms are those of its own text, cut from its own chunk
            content = contents[lv]
            texts = [content[s["start"] : s["end"]] for s in alone[lv]]
            assert all(t.strip() for t in texts)
            terms = a.execute(
                "SELECT jsonb_agg(to_jsonb(rag._content_terms(t)) ORDER BY o)"
                " FROM unnest(%s::text[]) WITH ORDINALITY AS u (t, o)",
                (texts,),
            ).fetchone()[0]
            assert [s["terms"] for s in alone[lv]] == terms
            # no duplicate span; a repeated sentence is two spans of the same similarity
            assert len({(s["start"], s["end"]) for s in alone[lv]}) == len(alone[lv])
            for t in set(texts):
                sims = [s["sim"] for s, x in zip(alone[lv], texts, strict=True) if x == t]
                assert max(sims) - min(sims) < 1e-5, (t, sims)
        repeated = "The kettle boils a litre of water in three minutes."
        assert sum(contents[x].count(repeated) for x in live) == 2
        spans = by_chunk(scores(live))
        assert sum(contents[x][s["start"] : s["end"]] == repeated for x in live for s in spans[x]) == 2

        # several live chunks at once, with a stored one, repeated, or with another tenant's: the same per
        # chunk
        for p_ids in (
            live,
            live[::-1],
            [live[0], live[0], *live],
            [*live, *stored],
            [stored[0], live[-1], stored[0]],
            [live[0], bravo[-1], live[-1], bravo[0]],
        ):
            got = by_chunk(scores(p_ids))
            assert set(got) == set(p_ids)
            for x, spans_x in got.items():
                same(spans_x, alone[x])
            # in chunk_id, start order, each once
            flat = [(s["chunk_id"], s["start"]) for s in scores(p_ids)]
            assert flat == sorted(set(flat))
        # the best span is the boiling sentence, live or stored
        best = max(alone[live[0]], key=lambda s: s["score"])
        assert contents[live[0]][best["start"] : best["end"]] == repeated


def _assert_verbatim(r: psycopg.Connection, a: dict, chunks: list[int]):
    """conftest.assert_verbatim, with citations of the given chunks only, and rag.verify giving back the very
    citations."""
    assert_verbatim(r, a)
    assert a["citations"]
    for c in a["citations"]:
        assert c["chunk_id"] in chunks, (c, chunks)
    cited = [{"n": c["n"], "chunk_id": c["chunk_id"], "quote": c["quote"]} for c in a["citations"]]
    again = r.execute(
        "SELECT answer, citations FROM rag.verify(%s, %s, %s)",
        (a["answer"], json.dumps(cited), [c["chunk_id"] for c in a["citations"]]),
    ).fetchone()
    assert again == (a["answer"], a["citations"])


def test_reader_ask_on_live_chunks_answers_as_on_stored_ones(pg, adb):
    """A reader's rag.ask whose passages are KETTLE's live chunks (alpha: sentences embedded now, MiniLM
    scores) answers as bravo's rag.ask on the same chunks ingested with their sentences: the same status, gate
    sentence signal (within 1e-5), answer and quotes at the same offsets, cut verbatim from alpha's chunks
    (also across CJK and astral characters); never bravo's copy nor its text."""
    db, ids = adb
    live = ids["live"]
    alpha_chunks = [*live, *ids["stored"], ids["verify"], *ids["alpha_doc"]]
    questions = [
        "How should I store the kettle?",
        "How do I descale the kettle?",
        "How long does the kettle boil a litre of water?",
        "What does the kettle boil in three minutes?",
        "How long does the teapot steep green tea?",
        "How many minutes does the 🫖 teapot steep green tea?",
        "How long does the kettle take to boil a litre of water?",
    ]
    sql = "SELECT status, answer, citations, evidence FROM rag.ask(%s, %s)"
    keys = ("status", "answer", "citations", "evidence")
    answered, after_emoji = 0, 0
    with connect(pg, db, R["reader"]) as r, connect(pg, db, R["bravo"]) as b:
        r.execute("SET statement_timeout = '120s'")
        contents = dict(
            r.execute("SELECT chunk_id, content FROM rag.chunk WHERE chunk_id = ANY(%s)", (live,))
        )
        for q in questions:
            got = dict(zip(keys, r.execute(sql, (q, "alpha")).fetchone(), strict=True))
            ref = dict(zip(keys, b.execute(sql, (q, "bravo")).fetchone(), strict=True))
            assert got["evidence"]["sentence_scoring"] == ref["evidence"]["sentence_scoring"] == "minilm"
            assert got["evidence"]["gate"]["signals"]["sentence"] == pytest.approx(
                ref["evidence"]["gate"]["signals"]["sentence"], abs=1e-5
            )
            assert (got["status"], got["answer"]) == (ref["status"], ref["answer"]), q
            spans = [
                (c["quote"], c["quote_start"], c["quote_end"], c["chunk_index"]) for c in got["citations"]
            ]
            assert spans == [
                (c["quote"], c["quote_start"], c["quote_end"], c["chunk_index"]) for c in ref["citations"]
            ]
            assert "pelican" not in json.dumps(got)
            if got["status"] != "answered":
                continue
            answered += 1
            _assert_verbatim(r, got, alpha_chunks)
            assert all(c["chunk_id"] in live for c in got["citations"]), got["citations"]
            after_emoji += any(
                c["quote_end"] > contents[c["chunk_id"]].find("🫖") >= 0 for c in got["citations"]
            )
    assert answered >= 4 and after_emoji >= 1, (answered, after_emoji)


def test_sentence_scores_give_what_they_gave_before_the_change(pg, adb):
    """rag._sentence_scores against its version at 64730aa (as s23old._sentence_scores): for live chunks
    (alone, several, repeated in p_ids, with a stored one or another tenant's) and stored ones, with and
    without the question's term weights given, the same spans, sims, scores and terms; the old one's quote was
    the span's text and its overlap is what the score holds beside sim (so nothing else changed)."""
    db, ids = adb
    if not _old_function(pg, db, "sql/core/053-sentence-scores.sql", "_sentence_scores"):
        pytest.skip("no git history of this checkout")
    live, bravo, stored = ids["live"], ids["bravo_kettle"], ids["stored"]
    with pg.admin(db) as a:
        contents = dict(
            a.execute("SELECT chunk_id, content FROM rag.chunk WHERE chunk_id = ANY(%s)", (live + bravo,))
        )
        compared = 0
        for q in ("How long does the kettle boil a litre of water?", "Store the kettle dry", "tea 🫖 日本語"):
            tw = a.execute("SELECT rag._question_term_weights(%s, %s)::text", (q, live[0])).fetchone()[0]
            for p_ids in (live, [live[0], live[0]], [live[-1], *stored], [live[0], bravo[0]], bravo, stored):
                for weights in (tw, None):
                    new = a.execute(SCORES, (q, q, p_ids, weights)).fetchone()[0]
                    old = a.execute(
                        "SELECT s23old._sentence_scores(%s, rag.embed(%s), %s, %s::jsonb)",
                        (q, q, p_ids, weights),
                    ).fetchone()[0]
                    assert new == [{k: v for k, v in s.items() if k not in ("quote", "overlap")} for s in old]
                    for s in old:
                        if s["chunk_id"] in contents:
                            assert s["quote"] == contents[s["chunk_id"]][s["start"] : s["end"]]
                    compared += len(new)
    assert compared > 100, compared


# ---------------------------------------------------------------- privileges
def test_tenant_roles_cannot_call_the_owner_only_internals(pg, adb):
    """rag._sentence_scores and rag._sentence_vectors: pgcite_owner's only, as at 64730aa (42501 for
    readers, writers, admins and a role with no pgcite right); rag._quote_span: readers' (rag.verify runs as
    its caller), not a role's with no pgcite right."""
    db, ids = adb
    live = ids["live"][0]
    passages = json.dumps([{"chunk_id": ids["bravo"], "content": "The launch code is secret."}])
    for who in ("reader", "writer", "bravo", "admin", "nobody"):
        with connect(pg, db, R[who]) as c:
            assert fails(c, SCORES, ("q", "q", [ids["bravo"]], None)) == "42501", who
            assert fails(c, "SELECT rag._sentence_scores('q', NULL, %s, NULL)", ([live],)) == "42501", who
            assert fails(c, "SELECT rag._sentence_vectors(%s)", (passages,)) == "42501", who
            if who == "nobody":
                assert fails(c, "SELECT * FROM rag._quote_span('a b', 'a  b')") == "42501"
            else:
                assert c.execute("SELECT s, e FROM rag._quote_span('a b', 'a  b')").fetchone() == (1, 4)
    with pg.admin(db) as a:
        grants = a.execute(
            "SELECT p.proname, r.rolname FROM pg_proc AS p CROSS JOIN pg_roles AS r"
            " WHERE p.pronamespace = 'rag'::regnamespace"
            " AND p.proname IN ('_sentence_scores', '_sentence_vectors', '_quote_span')"
            " AND r.rolname IN ('pgcite_reader', 'pgcite_writer', 'pgcite_admin', 'pg_database_owner')"
            " AND has_function_privilege(r.rolname, p.oid, 'EXECUTE') ORDER BY 1, 2"
        ).fetchall()
        public = a.execute(
            "SELECT count(*) FROM pg_proc WHERE pronamespace = 'rag'::regnamespace"
            " AND proname IN ('_sentence_scores', '_sentence_vectors', '_quote_span')"
            " AND has_function_privilege('public', oid, 'EXECUTE')"
        ).fetchone()[0]
    assert public == 0
    assert grants == [
        ("_quote_span", "pg_database_owner"),
        ("_quote_span", "pgcite_admin"),
        ("_quote_span", "pgcite_reader"),
        ("_quote_span", "pgcite_writer"),
    ]
