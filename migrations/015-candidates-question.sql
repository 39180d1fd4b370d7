-- 0.9.0 (issue #10, session 18): rag._candidates takes the question too (p_question, last), so that its vector
-- leg can end the question's embedding that rag._prepare_question began on the backend's worker thread
-- (pgcite_python) while the full-text and title legs ran. The five-argument function it replaces goes: with
-- both, a call of five arguments would be ambiguous.
DROP FUNCTION IF EXISTS rag._candidates(text, text, public.vector, integer, jsonb);
