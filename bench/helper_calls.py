"""A small rag helper per call as it is and as a PL/pgSQL copy, in one run (issue #10, session 10).

    .venv/bin/python bench/helper_calls.py --dsn 'host=... dbname=pgcite_quotes user=postgres' \\
        [--sql-dir OLD_DIR] [--calls 200] [--tenant pgdocs]

A LANGUAGE sql function with SET search_path is never inlined; called from PL/pgSQL or from another
function, its body is parsed and planned again on every call, where a PL/pgSQL function keeps its plans for
the session. For each helper rag.ask calls per ask, span or sentence: the helper as installed (or as
OLD_DIR's sql/core/*.sql define it: run in this script's transaction, rolled back at the end) and, when it
is LANGUAGE sql, a PL/pgSQL copy of its body in pg_temp (RETURN (body) or RETURN QUERY body), each called
--calls times from a DO block (after 20 warm-up calls; best of 3 runs), with its text arguments passed
through a volatile function so that an IMMUTABLE helper is not folded into a constant when the loop is
planned. The copy's result must equal the helper's. Prints ms per call for both and the difference. Needs a
superuser (pg_temp functions, OLD_DIR's files).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import psycopg

Q = "How do I add an index on that column, and how do I remove it later if it turns out to be useless?"
SPAN = "To remove an index, use the DROP INDEX command; you can add and remove indexes at any time."


def helpers(tenant: str, ids: list[int], bonus_args: int) -> dict[str, str]:
    """name -> a call of it with realistic arguments (text through pg_temp.v)."""
    q, span, arr = f"pg_temp.v({Q!r}::text)", f"pg_temp.v({SPAN!r}::text)", f"ARRAY{ids}::bigint[]"
    t = f"pg_temp.v({tenant!r}::text)"
    feats = "(SELECT f.features FROM pg_temp.features AS f)"
    return {
        # per ask
        "_coverage": f"rag._coverage({t}, 'english', {q}, {arr}, 331)",
        "_term_weights": f"(SELECT count(*) FROM rag._term_weights({t}, 'english', {q}, 0.75))",
        "_section_chunks": f"rag._section_chunks({t}, {arr}, 8)",
        "_gate_thresholds": f"rag._gate_thresholds((SELECT x FROM rag.tenant AS x WHERE tenant = {t}), "
        "rag._params())",
        "_word_forms": "rag._word_forms(pg_temp.v(ARRAY['nginx', 'unzipped', 'stopped', 'ebs']))",
        "_proper_names": f"rag._proper_names({q})",
        "_question_names": f"rag._question_names({q})",
        "_defined_term": "rag._defined_term('english', pg_temp.v('What is a hash map?'::text))",
        "_embedding_text": f"rag._embedding_text({q}, {Q!r})",
        "_fts_query": f"rag._fts_query('english', {q})",
        "_live_chunks": f"rag._live_chunks({t})",
        "_question_features": f"rag._question_features({q})",
        "_question_head": f"rag._question_head({q})",
        # per span, candidate or question word
        "_content_terms": f"rag._content_terms({span})",
        "_span_kind": f"rag._span_kind({span})",
        "_says_what_to_do": f"rag._says_what_to_do({span})",
        "_gives_reason": f"rag._gives_reason({span})",
        "_has_asked_form": f"rag._has_asked_form({span}, {feats})",
        "_quote_bonus": f"rag._quote_bonus({span}, {feats}{', NULL' if bonus_args == 3 else ''})",
        "_span_text": f"rag._span_text(ARRAY[1, 1]::bigint[], ARRAY[{span}, {span}], ARRAY[0, 10], "
        "ARRAY[9, 40], 1, 2)",
    }


def per_call(c: psycopg.Connection, call: str, n: int) -> float:
    c.execute(f"DO $d$ BEGIN FOR i IN 1..20 LOOP PERFORM {call}; END LOOP; END $d$")
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        c.execute(f"DO $d$ BEGIN FOR i IN 1..{n} LOOP PERFORM {call}; END LOOP; END $d$")
        best = min(best, (time.perf_counter() - t0) / n * 1000)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--sql-dir", help="sql/core of the version to measure (default: as installed)")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--tenant", default="pgdocs")
    args = ap.parse_args()
    c = psycopg.connect(args.dsn)  # one transaction, rolled back
    try:
        if args.sql_dir:
            for f in sorted(Path(args.sql_dir).glob("*.sql")):
                c.execute(f.read_text())
        c.execute(
            "CREATE FUNCTION pg_temp.v(anyelement) RETURNS anyelement LANGUAGE plpgsql VOLATILE "
            "AS $$ BEGIN RETURN $1; END $$"
        )
        # the question's features once (a one-row table read per call, not computed in the argument)
        c.execute(
            "CREATE TEMP TABLE features AS SELECT rag._question_features(%s) "
            "|| jsonb_build_object('weights', rag._quote_weights()) AS features",
            (Q,),
        )
        ids = [
            r[0]
            for r in c.execute(
                "SELECT chunk_id FROM rag.chunk WHERE tenant = %s ORDER BY chunk_id LIMIT 3", (args.tenant,)
            )
        ]
        bonus_args = c.execute(
            "SELECT max(pronargs) FROM pg_proc WHERE proname = '_quote_bonus' "
            "AND pronamespace = 'rag'::regnamespace"
        ).fetchone()[0]
        if (
            args.sql_dir
            and bonus_args == 3
            and "p_says_what_to_do" not in (Path(args.sql_dir) / "056-quote-forms.sql").read_text()
        ):
            bonus_args = 2
        print("| helper | language | as it is, ms per call | PL/pgSQL copy, ms per call | saved per call |")
        print("|---|---|---|---|---|")
        for name, call in helpers(args.tenant, ids, bonus_args).items():
            sig, src, res, lang, fargs, vol = lookup(c, name, bonus_args)
            as_is = per_call(c, call, args.calls)
            if lang != "sql":
                print(f"| `rag.{name}` | {lang} | {as_is:.3f} | | |")
                continue
            body = src.strip().rstrip(";")
            ret = f"RETURN QUERY {body};" if res.startswith(("TABLE", "SETOF")) else f"RETURN ({body});"
            volatility = {"i": "IMMUTABLE", "s": "STABLE", "v": "VOLATILE"}[vol]
            c.execute(
                f"CREATE FUNCTION pg_temp.{name}({fargs}) RETURNS {res} LANGUAGE plpgsql {volatility} "
                f"SET search_path = pg_catalog, pg_temp AS $q$ BEGIN {ret} END $q$"
            )
            copy = call.replace(f"rag.{name}(", f"pg_temp.{name}(", 1)
            same = c.execute(f"SELECT ({call})::text IS NOT DISTINCT FROM ({copy})::text").fetchone()[0]
            assert same, f"{name}: the copy's result differs"
            as_copy = per_call(c, copy, args.calls)
            print(f"| `rag.{name}` | sql | {as_is:.3f} | {as_copy:.3f} | {as_is - as_copy:.3f} |")
    finally:
        c.rollback()
        c.close()


def lookup(c: psycopg.Connection, name: str, bonus_args: int) -> tuple:
    """(signature, body, result, language, arguments, volatility) of rag.<name> (_quote_bonus: by arity)."""
    return c.execute(
        "SELECT p.oid::regprocedure::text, p.prosrc, pg_get_function_result(p.oid), l.lanname, "
        "pg_get_function_arguments(p.oid), p.provolatile FROM pg_proc AS p "
        "INNER JOIN pg_language AS l ON l.oid = p.prolang "
        "WHERE p.pronamespace = 'rag'::regnamespace AND p.proname = %s "
        "AND (p.proname <> '_quote_bonus' OR p.pronargs = %s)",
        (name, bonus_args),
    ).fetchone()


if __name__ == "__main__":
    main()
