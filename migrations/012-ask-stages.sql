-- 0.7.0 (issue #10, round 6): rag._sentence_scores takes the question's term weights (rag._question_term_weights),
-- which rag._answer computes once for the passages' and the section chunks' spans instead of once per call; the
-- signature without them goes (sql/core/053-sentence-scores.sql creates the new one).
DROP FUNCTION IF EXISTS rag._sentence_scores(text, public.vector, bigint[]);
