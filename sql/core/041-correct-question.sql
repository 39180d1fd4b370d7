-- rag.correct_question's work, as pgcite_owner: the question's spelling corrected against the tenant's words.
-- Until 0.5.0's security round 3, rag.correct_question ran rag._correct_question as the reader (under rag.term's
-- row level security), so readers held EXECUTE on it and on rag._common_words and could call them directly
-- with a question of any length or an array of any size (docs/security.md "Bounded work"). Now only
-- pgcite_owner runs them, here and inside the other SECURITY DEFINER entry points, every query naming the
-- tenant explicitly; they also read rag.word (every tenant's words, once each), which no tenant role may read.
CREATE OR REPLACE FUNCTION rag._correct_question_for(p_caller name, p_question text, p_tenant text)
RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'read');
    -- rag._correct_question checks the question's length itself (54000), for every caller
    RETURN rag._correct_question(p_tenant, p_question, rag._params());
END
$fn$;
COMMENT ON FUNCTION rag._correct_question_for(name, text, text) IS
'Internal (SECURITY DEFINER: runs spelling correction, which tenant roles may not run themselves): '
'rag.correct_question for the checked caller.';

CREATE OR REPLACE FUNCTION rag.correct_question(question text, tenant text)
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._correct_question_for(current_user, correct_question.question, correct_question.tenant)
$fn$;
COMMENT ON FUNCTION rag.correct_question(text, text) IS
'The question as retrieval reads it: lower case, with words the tenant''s corpus does not know replaced by the '
'nearest known word. A client that embeds questions itself embeds this text when it differs from the question''s '
'words (rag.ask does the same).';
GRANT EXECUTE ON FUNCTION rag.correct_question(text, text) TO pgcite_reader;
