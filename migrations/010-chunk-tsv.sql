-- 0.6.0 (issue #10, round 4): the full-text leg ranks up to 1,000 candidates with ts_rank_cd, and reading
-- each candidate's tsv from rag.chunk cost about as much as ranking it: the rows are ~2.9 kB wide (the
-- 1.5 kB embedding inline), tsv is their second-last column, so every candidate is a wide-row fetch and a
-- deform of every column before it (round 3: ~2.7 us of ~7 us per candidate). rag.chunk_tsv holds each live
-- chunk's tsvector once more in a narrow row (~650 B, stored uncompressed inline), read by primary key.
-- Kept by statement triggers on rag.chunk (sql/core/038-retrieve-stats.sql): an insert adds the live rows, a
-- retirement removes them (a chunk's tsv never changes: chunks are immutable). Like rag.tenant_lexeme it is read
-- only by pgcite's own functions: row security on, no policy, no grant. Derived, so not dumped: a restore's
-- COPY of rag.chunk fills it again.
CREATE TABLE rag.chunk_tsv (
    chunk_id bigint PRIMARY KEY,
    tsv tsvector NOT NULL
);
COMMENT ON TABLE rag.chunk_tsv IS
'Derived (triggers on rag.chunk): the tsvector of each live chunk in a narrow row, for the full-text ranking.';
ALTER TABLE rag.chunk_tsv ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.chunk_tsv OWNER TO pgcite_owner;

-- the live chunks of an existing installation (an upgrade from 0.5.0); empty on a fresh install
INSERT INTO rag.chunk_tsv (chunk_id, tsv)
SELECT
    c.chunk_id,
    c.tsv
FROM rag.chunk AS c
WHERE c.retired_at IS NULL
ORDER BY c.chunk_id;
