-- 0.5.0 (issue #10): what keeps every leg of retrieval bounded by an index instead of O(tenant).
-- Three derived tables, kept by statement triggers on rag.chunk (sql/core/038-retrieve-stats.sql) and filled
-- from the existing chunks by rag._rebuild_retrieval_stats() at the end of that file when they are empty:
-- - rag.tenant_stat: live chunks per tenant (the vector leg's exact/HNSW choice reads one row, not a sum over
--   the tenant's documents);
-- - rag.tenant_lexeme: in how many live chunks of the tenant each lexeme of rag.chunk.tsv occurs, so the
--   full-text leg ranks a bounded candidate set (its rarest terms first) instead of every OR match;
-- - rag.tenant_title: each distinct title of the tenant once, with the stripped title the trigram leg scores
--   and its lexemes, so that leg scores the titles sharing a word with the question, found through GIN.
-- They hold no text a tenant's readers could not read, but like rag.sentence they are read only by pgcite's
-- own functions: row security on, no policy. Derived, so not dumped: a restore's COPY of rag.chunk fills them.
CREATE TABLE rag.tenant_stat (
    tenant text PRIMARY KEY REFERENCES rag.tenant (tenant),
    live_chunks bigint NOT NULL DEFAULT 0
);
COMMENT ON TABLE rag.tenant_stat IS
'Derived (triggers on rag.chunk): the number of live chunks of each tenant.';

CREATE TABLE rag.tenant_lexeme (
    tenant text NOT NULL REFERENCES rag.tenant (tenant),
    lexeme text NOT NULL,
    live_chunks bigint NOT NULL,
    PRIMARY KEY (tenant, lexeme)
);
COMMENT ON TABLE rag.tenant_lexeme IS
'Derived (triggers on rag.chunk): in how many live chunks of the tenant each lexeme of their tsv occurs.';

CREATE TABLE rag.tenant_title (
    tenant text NOT NULL REFERENCES rag.tenant (tenant),
    title text NOT NULL,
    stripped text NOT NULL,
    tsv tsvector NOT NULL,
    live_chunks bigint NOT NULL,
    PRIMARY KEY (tenant, title)
);
CREATE INDEX tenant_title_tsv_idx ON rag.tenant_title USING gin (tsv);
COMMENT ON TABLE rag.tenant_title IS
'Derived (triggers on rag.chunk): each distinct non-empty title of a tenant''s chunks, its section number '
'stripped, its lexemes, and how many live chunks carry it.';

ALTER TABLE rag.tenant_stat ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.tenant_lexeme ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.tenant_title ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.tenant_stat OWNER TO pgcite_owner;
ALTER TABLE rag.tenant_lexeme OWNER TO pgcite_owner;
ALTER TABLE rag.tenant_title OWNER TO pgcite_owner;
