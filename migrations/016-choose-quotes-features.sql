-- 0.9.0 (issue #10, session 20): rag._choose_quotes takes what it reads from the question alone
-- (rag._quote_features) as an eighth argument, p_features (NULL: computed there, as before), so that rag._answer
-- can compute it before retrieval while the question's embedding runs in the background. The seven-argument
-- function it replaces goes: with both, a call of seven arguments would be ambiguous.
DROP FUNCTION IF EXISTS rag._choose_quotes(text, text, bigint[], jsonb, integer, float8, float8);
