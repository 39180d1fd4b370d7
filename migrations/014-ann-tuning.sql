-- 0.9.0 (issue #10, session 15): the search depth of each tenant's own HNSW graph, measured on that graph.
-- rag._tune_ann measures the recall@10 of the vector leg's ANN query through a tenant's own index against exact
-- search, for probe questions drawn from the tenant's own sentences, at each hnsw.ef_search of a ladder, and
-- keeps the smallest that reaches its target; rag._candidates searches the graph with it while the index is the
-- one measured (its relfilenode: a REINDEX, VACUUM FULL or a new index built under the same name is another
-- graph, which falls back to the size rule of rag._ann_ef until it is measured again).
-- Derived from the index like rag.tenant_stat from the chunks: not dumped (a restore builds new graphs).
CREATE TABLE rag.tenant_ann (
    tenant text PRIMARY KEY REFERENCES rag.tenant (tenant),
    index_name text NOT NULL,
    index_node oid NOT NULL,
    live_chunks bigint NOT NULL,
    ef_search integer NOT NULL CHECK (ef_search BETWEEN 1 AND 1000),
    recall float8 NOT NULL CHECK (recall BETWEEN 0 AND 1),
    min_recall float8 NOT NULL CHECK (min_recall BETWEEN 0 AND 1),
    probes integer NOT NULL CHECK (probes > 0),
    target float8 NOT NULL CHECK (target > 0 AND target <= 1),
    curve jsonb NOT NULL,
    tuned_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE rag.tenant_ann IS
'Derived (rag._tune_ann): the hnsw.ef_search the vector leg uses through a tenant''s own HNSW index '
'(index_name, measured while its relfilenode was index_node), the mean and lowest recall@10 of its probe questions '
'there, and the mean recall@10 at every ef_search measured (curve).';
ALTER TABLE rag.tenant_ann ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.tenant_ann OWNER TO pgcite_owner;
