-- 0.9.0 (issue #10, session 21): each title's trigrams (pg_trgm's show_trgm of the stripped title), kept with the
-- title in rag.tenant_title (sql/core/038-retrieve-stats.sql). The title leg (rag._candidates) bounds a title's
-- word_similarity with the question by the share of the title's trigrams the question has, and runs
-- word_similarity (~30 us a title for a 160-character question) only where that bound reaches the leg's cut-off.
ALTER TABLE rag.tenant_title ADD COLUMN trgm text[];
UPDATE rag.tenant_title SET trgm = public.show_trgm(stripped);
ALTER TABLE rag.tenant_title ALTER COLUMN trgm SET NOT NULL;
COMMENT ON COLUMN rag.tenant_title.trgm IS
'The stripped title''s trigrams (show_trgm): the title leg''s bound on its word_similarity with a question.';
