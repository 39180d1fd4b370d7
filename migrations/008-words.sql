-- 0.5.0 (issue #10, round 3): spelling correction bounded by an index. rag.term holds each tenant's words
-- (865,174 rows for 100 tenants at 1M chunks); its trigram index covers every tenant's words, so the words
-- similar to one unknown question word were found by reading all of the tenant's rag.term rows (21,332 for
-- the largest tenant: 15-29 ms per word). rag.word holds each distinct word of rag.term once with its own
-- trigram index: rag._correct_question finds the similar words there and keeps those the tenant has (through
-- term_pkey), so it reads only similar words.
-- rag.word mixes every tenant's vocabulary: it is read only by pgcite's own functions running as
-- pgcite_owner inside SECURITY DEFINER functions that authorised the caller for the tenant (row security on,
-- no policy, no grant), and a suggestion is always a word of the asker's own tenant. Kept by a statement
-- trigger on rag.term (sql/core/038-retrieve-stats.sql); words are never removed from rag.term, so a word
-- stays. Derived, so not dumped: restoring rag.term fills it again.
-- No unique key (security round 4): rag.word is shared by every tenant, and a unique key made an ingest adding a
-- new word wait for any other tenant's open transaction that had added the same word (or deadlock with it).
-- The trigger adds only words not there yet; two concurrent ingests may both add one (a duplicate row changes no
-- correction, and a rebuild removes it).
CREATE TABLE rag.word (
    word text NOT NULL
);
CREATE INDEX word_word_idx ON rag.word USING btree (word);
CREATE INDEX word_trgm_idx ON rag.word USING gin (word public.gin_trgm_ops);
COMMENT ON TABLE rag.word IS
'Derived (trigger on rag.term): each distinct word of every tenant''s vocabulary once, for spelling correction.';
ALTER TABLE rag.word ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.word OWNER TO pgcite_owner;

-- the words of an existing installation (an upgrade from 0.4.0); empty on a fresh install
INSERT INTO rag.word (word)
SELECT DISTINCT t.term FROM rag.term AS t
ORDER BY t.term;
