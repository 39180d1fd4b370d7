-- 0.8.0 (issue #10, session 10): rag._quote_bonus takes whether the span says what to do (rag._choose_quotes
-- computes it once per span; NULL: computed inside), and the small quote helpers are PL/pgSQL; the signature
-- without it goes (sql/core/056-quote-forms.sql creates the new one).
DROP FUNCTION IF EXISTS rag._quote_bonus(text, jsonb);
