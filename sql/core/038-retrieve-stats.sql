-- The derived tables of migrations/007 (rag.tenant_stat, rag.tenant_lexeme, rag.tenant_title), kept by two
-- statement triggers on rag.chunk: a chunk counts from its insert until retired_at is set (chunks are never
-- deleted; rag.chunk's own trigger refuses it). rag.ingest inserts a document's chunks in one statement, so
-- the cost is one grouped upsert per table per document. A bulk load that bypasses triggers (COPY with
-- session_replication_role = replica, as bench/corpus.py) calls rag._rebuild_retrieval_stats() after it.
-- The tables are not in pg_dump's output (no pg_extension_config_dump): restoring a dump COPYs rag.chunk,
-- and the insert trigger counts its rows again.
-- The per-tenant partial HNSW indexes of the vector leg are built here too (rag._index_tenants).

-- The title the trigram leg compares with the question: without its section number ("23.1. ", "F.35.2 ").
CREATE OR REPLACE FUNCTION rag._title_stripped(p_title text)
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.regexp_replace(p_title, '^[0-9A-Z]*[0-9.]+\s+', '')
$fn$;
COMMENT ON FUNCTION rag._title_stripped(text) IS
'Internal: a chunk title without its leading section number, as the title-trigram leg scores it.';

-- One trigger function for both statements: the rows a statement inserted live (sign 1) or retired
-- (sign -1), grouped, upserted into the three tables in key order, so two concurrent ingests into one
-- tenant take their row locks in the same order. A removal is an upsert too, of a negative count (the
-- tables have no CHECK (>= 0), which INSERT ... ON CONFLICT would check on the proposed row). The rows are
-- read from the transition tables by EXECUTE, which sees them only in the trigger function itself; the
-- source is one of two constant queries, never input. Only the columns the counts need are read, so a
-- restore that COPYs a million chunks in one statement does not hold them in memory.
CREATE OR REPLACE FUNCTION rag._chunk_stats()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    src text;
    sgn integer;
    gone_tenants text [];
    gone_keys text [];
    gone_title_tenants text [];
    gone_titles text [];
    g record;
BEGIN
    IF TG_OP = 'INSERT' THEN
        src := 'SELECT n.tenant, n.title, n.ts_config, n.tsv FROM new_rows AS n WHERE n.retired_at IS NULL';
        sgn := 1;
    ELSE
        src := 'SELECT n.tenant, n.title, n.ts_config, n.tsv FROM new_rows AS n '
            'INNER JOIN old_rows AS o ON o.chunk_id = n.chunk_id '
            'WHERE o.retired_at IS NULL AND n.retired_at IS NOT NULL';
        sgn := -1;
    END IF;
    EXECUTE pg_catalog.format(
        'INSERT INTO rag.tenant_stat AS s (tenant, live_chunks) '
        'SELECT r.tenant, %s * pg_catalog.count(*) FROM (%s) AS r GROUP BY r.tenant ORDER BY r.tenant '
        'ON CONFLICT (tenant) DO UPDATE SET live_chunks = s.live_chunks + excluded.live_chunks', sgn, src);
    -- the upsert returns the lexemes whose count fell to zero (a retirement), deleted below by key
    EXECUTE pg_catalog.format(
        'WITH up AS (INSERT INTO rag.tenant_lexeme AS l (tenant, lexeme, live_chunks) '
        'SELECT r.tenant, x.lexeme, %s * pg_catalog.count(*) FROM (%s) AS r '
        'CROSS JOIN LATERAL pg_catalog.unnest(r.tsv) AS x (lexeme, positions, weights) '
        'GROUP BY r.tenant, x.lexeme ORDER BY r.tenant, x.lexeme '
        'ON CONFLICT (tenant, lexeme) DO UPDATE SET live_chunks = l.live_chunks + excluded.live_chunks '
        'RETURNING l.tenant, l.lexeme, l.live_chunks) '
        'SELECT pg_catalog.array_agg(up.tenant), pg_catalog.array_agg(up.lexeme) FROM up WHERE up.live_chunks <= 0',
        sgn, src) INTO gone_tenants, gone_keys;
    EXECUTE pg_catalog.format(
        'WITH up AS (INSERT INTO rag.tenant_title AS t (tenant, title, stripped, tsv, trgm, live_chunks) '
        'SELECT g.tenant, g.title, rag._title_stripped(g.title), '
        '    pg_catalog.to_tsvector(g.cfg, rag._title_stripped(g.title)), '
        '    public.show_trgm(rag._title_stripped(g.title)), g.n '
        'FROM (SELECT r.tenant, r.title, (pg_catalog.array_agg(r.ts_config))[1] AS cfg, %s * pg_catalog.count(*) AS n '
        '      FROM (%s) AS r WHERE r.title <> %L GROUP BY r.tenant, r.title) AS g '
        'ORDER BY g.tenant, g.title '
        'ON CONFLICT (tenant, title) DO UPDATE SET live_chunks = t.live_chunks + excluded.live_chunks '
        'RETURNING t.tenant, t.title, t.live_chunks) '
        'SELECT pg_catalog.array_agg(up.tenant), pg_catalog.array_agg(up.title) FROM up WHERE up.live_chunks <= 0',
        sgn, src, '') INTO gone_title_tenants, gone_titles;
    IF sgn < 0 THEN
        -- counts that fell to zero go (the rows just locked by the upserts above): the tables stay what
        -- rag._rebuild_retrieval_stats or a restore makes of the live chunks, and retired words do not pile up;
        -- by key, one tenant at a time, the keys a constant array (EXECUTE ... USING): an index scan, or a seq
        -- scan with a hashed = ANY, linear either way. A join of the zeroed rows with the statement's keys was
        -- planned from the statistics, where almost no count is zero: a nested loop that compared every zeroed
        -- row with every key, 242 million comparisons (182 s) to retire a 1,000-chunk document of 22,000 new
        -- lexemes in a fresh database (security round 11)
        FOR g IN
            SELECT x.tbl, x.col, u.tenant, pg_catalog.array_agg(u.k) AS keys
            FROM (
                VALUES ('tenant_lexeme', 'lexeme', gone_tenants, gone_keys),
                    ('tenant_title', 'title', gone_title_tenants, gone_titles)
            ) AS x (tbl, col, tenants, keys),
                ROWS FROM (pg_catalog.unnest(x.tenants), pg_catalog.unnest(x.keys)) AS u (tenant, k)
            GROUP BY x.tbl, x.col, u.tenant
        LOOP
            EXECUTE pg_catalog.format('DELETE FROM rag.%I AS t '
                'WHERE t.tenant = $1 AND t.%I OPERATOR(pg_catalog.=) ANY ($2) AND t.live_chunks <= 0', g.tbl, g.col)
            USING g.tenant, g.keys;
        END LOOP;
        EXECUTE pg_catalog.format(
            'DELETE FROM rag.tenant_stat AS s USING (SELECT DISTINCT r.tenant FROM (%s) AS r) AS k '
            'WHERE s.tenant = k.tenant AND s.live_chunks <= 0', src);
    END IF;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION rag._chunk_stats() IS
'Internal trigger: counts the live chunks a statement inserted, or uncounts those it retired, in the per-tenant '
'retrieval statistics.';

CREATE OR REPLACE TRIGGER chunk_stats_insert AFTER INSERT ON rag.chunk
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION rag._chunk_stats();
CREATE OR REPLACE TRIGGER chunk_stats_update AFTER UPDATE ON rag.chunk
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION rag._chunk_stats();

-- rag.chunk_tsv (migrations/010): each live chunk's tsvector in a narrow row, which the full-text leg ranks
-- (rag._candidates) instead of reading rag.chunk's ~2.9 kB rows. An insert adds the statement's live rows, a
-- retirement (the only update a chunk allows) removes them, both in chunk_id order.
CREATE OR REPLACE FUNCTION rag._chunk_tsv()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO rag.chunk_tsv (chunk_id, tsv, tenant)
        SELECT n.chunk_id, n.tsv, n.tenant FROM new_rows AS n
        WHERE n.retired_at IS NULL
        ORDER BY n.chunk_id;
    ELSE
        DELETE FROM rag.chunk_tsv AS t
        USING new_rows AS n, old_rows AS o
        WHERE o.chunk_id = n.chunk_id AND o.retired_at IS NULL AND n.retired_at IS NOT NULL
            AND t.chunk_id = n.chunk_id;
    END IF;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION rag._chunk_tsv() IS
'Internal trigger: adds the live chunks a statement inserted to rag.chunk_tsv, or removes those it retired.';

CREATE OR REPLACE TRIGGER chunk_tsv_insert AFTER INSERT ON rag.chunk
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION rag._chunk_tsv();
CREATE OR REPLACE TRIGGER chunk_tsv_update AFTER UPDATE ON rag.chunk
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION rag._chunk_tsv();

-- rag.word (migrations/008): each distinct word of rag.term once, for spelling correction. A statement
-- trigger adds the words a statement inserted into rag.term (an ingest adds a document's new words in one
-- statement) that rag.word does not hold yet. No unique key (migrations/008): an ingest never waits for another
-- tenant's open transaction that added the same word; two concurrent ones may both add it (harmless).
-- rag.term rows are never deleted, so neither are words.
CREATE OR REPLACE FUNCTION rag._term_words()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    INSERT INTO rag.word (word)
    SELECT DISTINCT n.term FROM new_terms AS n
    WHERE NOT EXISTS (SELECT FROM rag.word AS v WHERE v.word = n.term);
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION rag._term_words() IS
'Internal trigger: adds the words a statement inserted into rag.term to rag.word (spelling correction).';

CREATE OR REPLACE TRIGGER term_words_insert AFTER INSERT ON rag.term
REFERENCING NEW TABLE AS new_terms
FOR EACH STATEMENT EXECUTE FUNCTION rag._term_words();

-- Recomputes the three tables and rag.chunk_tsv from rag.chunk, and rag.word from rag.term (after a bulk load
-- that bypassed the triggers, or to check them).
CREATE OR REPLACE FUNCTION rag._rebuild_retrieval_stats()
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    n bigint;
BEGIN
    LOCK TABLE rag.chunk IN SHARE MODE;
    DELETE FROM rag.tenant_stat;
    DELETE FROM rag.tenant_lexeme;
    DELETE FROM rag.tenant_title;
    INSERT INTO rag.tenant_stat (tenant, live_chunks)
    SELECT c.tenant, pg_catalog.count(*) FROM rag.chunk AS c WHERE c.retired_at IS NULL GROUP BY c.tenant;
    INSERT INTO rag.tenant_lexeme (tenant, lexeme, live_chunks)
    SELECT c.tenant, x.lexeme, pg_catalog.count(*)
    FROM rag.chunk AS c
    CROSS JOIN LATERAL pg_catalog.unnest(c.tsv) AS x (lexeme, positions, weights)
    WHERE c.retired_at IS NULL
    GROUP BY c.tenant, x.lexeme;
    INSERT INTO rag.tenant_title (tenant, title, stripped, tsv, trgm, live_chunks)
    SELECT g.tenant, g.title, rag._title_stripped(g.title),
        pg_catalog.to_tsvector(g.cfg, rag._title_stripped(g.title)), public.show_trgm(rag._title_stripped(g.title)),
        g.n
    FROM (
        SELECT c.tenant, c.title, (pg_catalog.array_agg(c.ts_config))[1] AS cfg, pg_catalog.count(*) AS n
        FROM rag.chunk AS c
        WHERE c.retired_at IS NULL AND c.title <> ''
        GROUP BY c.tenant, c.title
    ) AS g;
    DELETE FROM rag.chunk_tsv;
    INSERT INTO rag.chunk_tsv (chunk_id, tsv, tenant)
    SELECT c.chunk_id, c.tsv, c.tenant FROM rag.chunk AS c WHERE c.retired_at IS NULL ORDER BY c.chunk_id;
    LOCK TABLE rag.term IN SHARE MODE;
    DELETE FROM rag.word;
    INSERT INTO rag.word (word)
    SELECT DISTINCT t.term FROM rag.term AS t;
    SELECT coalesce(sum(s.live_chunks), 0)::bigint INTO n FROM rag.tenant_stat AS s;
    RETURN n;
END
$fn$;
COMMENT ON FUNCTION rag._rebuild_retrieval_stats() IS
'Internal: recomputes rag.tenant_stat, rag.tenant_lexeme, rag.tenant_title and rag.chunk_tsv from rag.chunk and '
'rag.word from rag.term; returns the number of live chunks.';

-- ---------------------------------------------------------------- per-tenant HNSW indexes
-- A filtered scan of the one HNSW index of rag.chunk walks about k / share rows of the whole table before it
-- has k of the tenant's, so a tenant with 1 % of the table pays for 100 times its result. A partial index
-- per large tenant (WHERE tenant = '...' AND retired_at IS NULL) is a graph of that tenant's rows alone;
-- rag._candidates uses it when it exists (by its name, rag._tenant_index_name). Building one locks rag.chunk
-- against writes for its build (seconds per 10,000 chunks): a DBA's operation, like CREATE INDEX.
CREATE OR REPLACE FUNCTION rag._tenant_index_name(p_tenant text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN 'chunk_hnsw_' || pg_catalog.left(pg_catalog.md5(p_tenant), 20);
END
$fn$;
COMMENT ON FUNCTION rag._tenant_index_name(text) IS
'Internal: the name of the partial HNSW index of a tenant''s live chunks in schema rag.';

-- The full-text leg's GIN index holds every tenant's chunks: the bitmap of a 1 % tenant's lexemes is about a
-- hundred times its own matches (59,000 TIDs, 9.6 ms, to keep 557 of a 10,000-chunk tenant at 1M). The
-- tenants that get a partial HNSW index get a partial GIN index on tsv too, found by this name: on rag.chunk_tsv
-- (the narrow rows, which rag.chunk_tsv.tenant lets it hold for one tenant) since 0.9.0 (migration 018), so the
-- leg reads its candidates' ids and tsvectors in one scan; on rag.chunk before.
CREATE OR REPLACE FUNCTION rag._tenant_fts_index_name(p_tenant text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN 'chunk_tsv_' || pg_catalog.left(pg_catalog.md5(p_tenant), 20);
END
$fn$;
COMMENT ON FUNCTION rag._tenant_fts_index_name(text) IS
'Internal: the name of the partial GIN (tsv) index of a tenant''s live chunks (on rag.chunk_tsv) in schema rag.';

-- The title leg's GIN index on rag.tenant_title holds every tenant's titles: tenants built from the same
-- manuals share most titles, so a lookup for the largest tenant at 1M returned 1,384 titles to keep its 50
-- (1.4 ms). The tenants that get the two indexes above get a partial GIN index on their own titles too (a
-- few hundred kB); rag._candidates needs no change, as its custom plan proves the index's predicate.
CREATE OR REPLACE FUNCTION rag._tenant_title_index_name(p_tenant text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT 'tenant_title_tsv_' || pg_catalog.left(pg_catalog.md5(p_tenant), 20)
$fn$;
COMMENT ON FUNCTION rag._tenant_title_index_name(text) IS
'Internal: the name of the partial GIN (tsv) index of a tenant''s titles (rag.tenant_title) in schema rag.';

-- The storage options of a tenant's own HNSW index: ef_construction 200 at every size (pgvector's default is 64).
-- At 1M chunks the graph of a 350,000-chunk tenant reached recall@10 0.998 at ef_search 600 against 0.990 at 800
-- on the default graph, in the same time, for a build 3.8 x as long (196 s against 51 s on 2 cores; session 12),
-- and a 10,000-chunk tenant's 1.000 at ef_search 200 against 0.999 at 200 and 1.000 only at 400 on the default
-- graph, for a build of 3.0-3.7 s instead of 2.2 s (session 14); the size is the same (docs/BENCHMARKS.md,
-- 0.9.0). rag._ann_ef reads it back from the index (rag._index_is_dense). p_live is kept for a size rule.
CREATE OR REPLACE FUNCTION rag._hnsw_build_options(p_live bigint)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT ' WITH (ef_construction = 200)'
$fn$;
COMMENT ON FUNCTION rag._hnsw_build_options(bigint) IS
'Internal: the WITH clause of a tenant''s own HNSW index for p_live live chunks (ef_construction 200 at '
'every size).';

CREATE OR REPLACE FUNCTION rag._index_tenants(p_min_chunks bigint, p_tenant text DEFAULT NULL)
RETURNS TABLE (tenant text, live_chunks bigint, index_name text, build_s float8, size_mb float8)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    s record;
    t0 timestamptz;
BEGIN
    IF p_min_chunks IS NULL OR p_min_chunks < 1 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('p_min_chunks must be at least 1, not %s', coalesce(p_min_chunks::text, 'NULL'));
    END IF;
    -- each tenant's partial HNSW index, its partial GIN index on tsv, then the partial GIN index of its
    -- titles (each built only when missing); the table, method and predicate are constants, the tenant a literal
    FOR s IN
        SELECT st.tenant, st.live_chunks, x.name, x.tbl, x.kind, x.pred FROM rag.tenant_stat AS st
        CROSS JOIN LATERAL (VALUES
            (1, rag._tenant_index_name(st.tenant), 'rag.chunk',
                'hnsw (embedding public.vector_cosine_ops)' || rag._hnsw_build_options(st.live_chunks),
                'tenant = %L AND retired_at IS NULL'),
            (2, rag._tenant_fts_index_name(st.tenant), 'rag.chunk_tsv', 'gin (tsv)', 'tenant = %L'),
            (3, rag._tenant_title_index_name(st.tenant), 'rag.tenant_title', 'gin (tsv)', 'tenant = %L')
        ) AS x (n, name, tbl, kind, pred)
        WHERE st.live_chunks >= p_min_chunks
            AND (p_tenant IS NULL OR st.tenant = p_tenant COLLATE "default")
            AND pg_catalog.to_regclass('rag.' || x.name) IS NULL
        ORDER BY st.live_chunks DESC, st.tenant, x.n
    LOOP
        t0 := pg_catalog.clock_timestamp();
        EXECUTE pg_catalog.format('CREATE INDEX %I ON %s USING %s WHERE ' || s.pred, s.name, s.tbl, s.kind, s.tenant);
        tenant := s.tenant;
        live_chunks := s.live_chunks;
        index_name := s.name;
        build_s := round(extract(EPOCH FROM pg_catalog.clock_timestamp() - t0)::numeric, 1)::float8;
        size_mb := round(pg_catalog.pg_relation_size(('rag.' || index_name)::regclass) / 1048576.0, 1)::float8;
        RETURN NEXT;
        IF s.name = rag._tenant_index_name(s.tenant) THEN
            -- a new graph: measure the search it needs (rag._tune_ann, not counted in build_s)
            PERFORM FROM rag._tune_ann(s.tenant);
        END IF;
    END LOOP;
END
$fn$;
COMMENT ON FUNCTION rag._index_tenants(bigint, text) IS
'Internal (a DBA''s operation): builds the partial HNSW index, the partial GIN (tsv) index and the partial GIN '
'index of the titles (rag.tenant_title) of every tenant (or only p_tenant) with at least p_min_chunks live '
'chunks that lacks them; returns each index built with its build time and size.';

-- After the upgrade that adds the tables (or an install over existing data), fill them once.
SELECT rag._rebuild_retrieval_stats()
WHERE NOT EXISTS (SELECT FROM rag.tenant_stat) AND EXISTS (SELECT FROM rag.chunk);
