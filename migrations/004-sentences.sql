-- 0.3.0: sentences of every chunk with their embeddings, computed once at ingest, so that rag.ask embeds
-- nothing but the question and scores sentences in SQL (the core alone, without PL/Python, then chooses quotes
-- by MiniLM similarity too). Every span of a chunk is stored, short ones included, so a chunk with rows here is
-- a chunk whose sentences were computed.
CREATE TABLE rag.sentence (
    chunk_id bigint NOT NULL REFERENCES rag.chunk (chunk_id),
    ord integer NOT NULL CHECK (ord >= 0),
    start_pos integer NOT NULL CHECK (start_pos >= 0),
    end_pos integer NOT NULL,
    embedding public.vector(384) NOT NULL,
    terms text[] NOT NULL,
    PRIMARY KEY (chunk_id, ord),
    CHECK (end_pos > start_pos)
);
COMMENT ON TABLE rag.sentence IS
'The sentences of each chunk (0-based character offsets into its content), their embeddings and content words '
'(rag._content_terms), for choosing quotes. Immutable like the chunk; read only by pgcite''s own functions.';
SELECT pg_catalog.pg_extension_config_dump('rag.sentence', '');
-- no policy: no pgcite role reads it directly (it holds embeddings); the SECURITY DEFINER functions do
ALTER TABLE rag.sentence ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.sentence OWNER TO pgcite_owner;
-- exact scans of a tenant read the embedding inline (not TOASTed: 3 buffer hits per row otherwise)
ALTER TABLE rag.chunk ALTER COLUMN embedding SET STORAGE PLAIN;

-- One sentence on its way into rag.sentence: chunk_ord is the 1-based position of its chunk in the document.
CREATE TYPE rag.sentence_input AS (
    chunk_ord integer,
    start_pos integer,
    end_pos integer,
    embedding public.vector (384)
);

-- the title leg of retrieval reads each tenant's distinct titles from this index
CREATE INDEX chunk_title_idx ON rag.chunk (tenant, title) WHERE retired_at IS NULL;
