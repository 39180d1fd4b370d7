-- Grants of internal functions (rag._*), and the owner of the SECURITY DEFINER ones.
-- * SECURITY DEFINER functions belong to pgcite_owner (NOLOGIN, not a superuser, owner of the tables) and may
--   be executed by the role their public wrapper is for: readers, writers or admins. Each checks its caller,
--   and runs with standard_conforming_strings and extra_float_digits pinned (not the caller's).
-- * Every other internal function is revoked from PUBLIC and granted to pgcite_owner (which runs them inside
--   the SECURITY DEFINER functions) and to the role that runs it as itself: pgcite_reader for the few that
--   row level security and rag.embed need, pgcite_writer for rag.ingest's; rag._generator_call (pgcite_python),
--   spelling correction and the DBA's index and statistics operations only pgcite_owner may run.
-- pgcite_python calls this again for the functions it adds.
CREATE OR REPLACE FUNCTION rag._apply_grants()
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    f record;
    n integer := 0;
    grantee text;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure AS sig, p.proname, p.prosecdef
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'rag'::regnamespace AND p.proname LIKE '\_%' AND p.prokind = 'f'
            AND p.prorettype <> 'trigger'::regtype AND p.proname <> '_apply_grants'
    LOOP
        -- revoke everything first, so the ACL is the same after an upgrade as after a fresh install
        EXECUTE pg_catalog.format(
            'REVOKE ALL ON FUNCTION %s FROM PUBLIC, pgcite_reader, pgcite_writer, pgcite_admin, pgcite_owner, '
            'pg_database_owner', f.sig);
        IF f.prosecdef THEN
            EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO pgcite_owner', f.sig);
            -- settings of the caller's session that change what pgcite's SQL means, pinned for the call: how
            -- string literals (regular expressions) are read, and how floats become text and JSON (the
            -- fingerprint and the scores that are logged). docs/security.md "Session settings".
            EXECUTE pg_catalog.format(
                'ALTER FUNCTION %s SET standard_conforming_strings = on SET extra_float_digits = 1', f.sig);
            grantee := CASE
                WHEN f.proname IN ('_authorize', '_ask', '_retrieve', '_explain', '_replay', '_verify_log',
                    '_context', '_answer_context', '_correct_question_for', '_embed_checked',
                    '_embed_one') THEN 'pgcite_reader'
                WHEN f.proname IN ('_store_version', '_store_document', '_store_parsed', '_delete_document',
                    '_lock_document', '_reused_embeddings', '_reused_sentences', '_reused_spans', '_parsed',
                    '_sentence_spans') THEN 'pgcite_writer'
                ELSE 'pgcite_admin'
            END;
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I, pgcite_owner', f.sig, grantee);
        ELSIF f.proname IN ('_generator_call', '_index_tenants', '_tune_ann', '_tuned_ef', '_rebuild_retrieval_stats', '_correct_question',
            '_common_words', '_real_words', '_foreign_names', '_word_forms', '_embed_texts', '_embed_begin', '_embed_end', '_parse', '_split_sentences',
            '_sentence_vectors', '_support_similarity', '_answer', '_sentence_scores', '_prepare_question', '_query_embedding',
            '_generate', '_generation_step', '_enforce_reply', '_recheck_generation', '_support_scores',
            '_candidates', '_coverage', '_live_chunks', '_term_weights', '_span_score_bounds', '_may_score_at_least',
            '_answer_options', '_require_generator', '_question_term_weights', '_lexical_sentences', '_word_terms',
            '_title_question', '_tenant_term_weights', '_choose_quotes', '_quote_features', '_question_features',
            '_quote_bonuses', '_quote_bonus', '_any_lexeme') THEN
            -- sends requests to a generator: only from rag.ask's SECURITY DEFINER function; builds indexes or
            -- rewrites the retrieval statistics of every tenant: a DBA's operations (superuser or pgcite_owner);
            -- spelling correction: only inside the SECURITY DEFINER entry points, which bound the question first
            -- (called directly, a reader chose its length and the size of _common_words' array); the gate's
            -- foreign names, which call _common_words, likewise only from rag._answer inside those entry points;
            -- pgcite_python's PL/Python functions that take texts or arrays: PL/Python converts its arguments
            -- before the first line runs, so tenant roles reach them only through a SECURITY DEFINER function
            -- that checks the sizes first (rag._embed_checked, rag._parsed, rag._sentence_spans) or from
            -- inside pgcite's own SECURITY DEFINER functions (sentences and support at ask time); and what calls
            -- those, only ever from a SECURITY DEFINER function (answering, preparing a question, generating):
            -- granted to a role, it would fail for that role with 42501 anyway (security round 9: every function a
            -- role may execute calls only internals it may execute, tests/test_attacks_080.py); and what reads
            -- tables the role may not read (retrieval's statistics, sentences, generators), only ever called from
            -- SECURITY DEFINER functions too (security round 10: each raised 42501 for the writer it was granted to)
            -- (rag._word_terms: only rag._term_weights calls it, issue #10 session 15)
            -- (rag._title_question: only rag._candidates calls it, issue #10 session 16)
            -- (rag._tenant_term_weights: only rag._answer and rag._question_term_weights, issue #10 session 19)
            -- (quote choice, rag._choose_quotes, rag._quote_features, rag._question_features, rag._quote_bonuses,
            -- rag._quote_bonus: only rag._answer calls them; granted to writers, a writer could pass them features
            -- of any size (a million names: seconds of CPU until its statement_timeout) and, with
            -- standard_conforming_strings off, leave its session's cached plans of their patterns broken for its
            -- later asks; security review of session 20)
            -- (rag._any_lexeme: only rag._candidates calls it; PL/pgSQL since session 20, so a writer's own call
            -- would have left its plan in the writer's session)
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pgcite_owner', f.sig);
        ELSE
            -- readers: what row level security, rag.embed and rag.verify run as the reader (rag.verify called
            -- rag._quote_pattern, granted to writers only: 42501 for every pure reader from 0.6.0 to 0.7.0);
            -- writers: what rag.ingest runs as the writer (parsing, chunking: CPU in proportion to input)
            grantee := CASE
                WHEN f.proname IN ('_my_tenants', '_config_text', '_settings_catalog', '_params',
                    '_python_init', '_check_question', '_quote_pattern', '_quote_span') THEN 'pgcite_reader'
                ELSE 'pgcite_writer'
            END;
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pgcite_owner, %I', f.sig, grantee);
        END IF;
        n := n + 1;
    END LOOP;
    -- the public functions that run as their caller (rag.verify, rag.ingest, rag.ask's and rag.retrieve's
    -- wrappers, ...): how string literals are read is pinned for their call too, so that what they run as the
    -- caller (rag.verify's own regular expressions, the internals rag.ingest calls) is parsed as written; with a
    -- reader's standard_conforming_strings off, rag.verify failed with 2201B (session 21). Their SECURITY
    -- DEFINER callees pin it already (above).
    FOR f IN
        SELECT p.oid::regprocedure AS sig
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'rag'::regnamespace AND p.proname NOT LIKE '\_%' AND p.prokind = 'f'
            AND NOT p.prosecdef AND p.prorettype <> 'trigger'::regtype
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET standard_conforming_strings = on', f.sig);
    END LOOP;
    -- the owner of this database administers pgcite here (rag._is_admin): it may run what pgcite_admin may
    -- (which includes what readers and writers may), wherever that is not granted to PUBLIC anyway
    FOR f IN
        SELECT p.oid::regprocedure AS sig
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'rag'::regnamespace AND p.prokind = 'f'
            AND pg_catalog.has_function_privilege('pgcite_admin', p.oid, 'EXECUTE')
            AND NOT pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE')
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pg_database_owner', f.sig);
    END LOOP;
    RETURN n;
END
$fn$;
REVOKE ALL ON FUNCTION rag._apply_grants() FROM PUBLIC;
COMMENT ON FUNCTION rag._apply_grants() IS
'Internal: revokes rag._* functions from PUBLIC, gives SECURITY DEFINER ones to pgcite_owner and grants them to '
'the role of their wrapper; other internals to pgcite_owner and the role that runs them as itself.';


-- Public functions: the role each is for (schema usage is granted to pgcite_reader only).
GRANT EXECUTE ON FUNCTION rag.model_name() TO pgcite_reader;
REVOKE ALL ON FUNCTION rag.create_tenant(text, regconfig) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.grant_tenant(text, regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.revoke_tenant(text, regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.prune_members() FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.set_config(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.log_head(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.create_generator(text, text, text, text, float8, integer, float8, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.drop_generator(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.create_tenant(text, regconfig) TO pgcite_admin;
GRANT EXECUTE ON FUNCTION rag.grant_tenant(text, regrole) TO pgcite_admin;
GRANT EXECUTE ON FUNCTION rag.revoke_tenant(text, regrole) TO pgcite_admin;
GRANT EXECUTE ON FUNCTION rag.prune_members() TO pgcite_admin;
GRANT EXECUTE ON FUNCTION rag.set_config(text, text) TO pgcite_admin;
GRANT EXECUTE ON FUNCTION rag.create_generator(text, text, text, text, float8, integer, float8, text, jsonb)
TO pgcite_admin;
GRANT EXECUTE ON FUNCTION rag.drop_generator(text) TO pgcite_admin;
GRANT EXECUTE ON FUNCTION rag.context(text, text, integer, public.vector, jsonb) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.answer(bigint, jsonb, text, text) TO pgcite_reader;

-- last: the owner of this database gets what pgcite_admin got above
SELECT rag._apply_grants();
