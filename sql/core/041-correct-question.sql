-- rag.correct_question's work, as pgcite_owner: the question's spelling corrected against the tenant's words.
-- Until 0.5.0's security round 3, rag.correct_question ran rag._correct_question as the reader (under rag.term's
-- row level security), so readers held EXECUTE on it and on rag._common_words and could call them directly
-- with a question of any length or an array of any size (docs/security.md "Bounded work"). Now only
-- pgcite_owner runs them, here and inside the other SECURITY DEFINER entry points, every query naming the
-- tenant explicitly.
CREATE OR REPLACE FUNCTION rag._correct_question_for(p_caller name, p_question text, p_tenant text)
RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'read');
    PERFORM rag._check_question(p_question, 1);  -- 54000 over 4000 characters, as rag.ask
    RETURN rag._correct_question(p_tenant, p_question, rag._params());
END
$fn$;
COMMENT ON FUNCTION rag._correct_question_for(name, text, text) IS
'Internal (SECURITY DEFINER: runs spelling correction, which tenant roles may not run themselves): '
'rag.correct_question for the checked caller.';
