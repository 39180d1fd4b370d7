-- Retrieve: three legs (vector, full text, trigram) fused by reciprocal rank fusion, with a total order.
-- Every ordering ends in (doc_key, chunk_index, chunk_id) and every score is rounded before it orders,
-- so float noise, plans, VACUUM and REINDEX cannot change the result.
-- The question's checks, correction and embedding are in 039-question.sql, the vector leg's HNSW search
-- parameters and their tuning in 039-ann.sql.

-- The live chunks of a tenant: one row of rag.tenant_stat, kept by triggers on rag.chunk.
CREATE OR REPLACE FUNCTION rag._live_chunks(p_tenant text)
RETURNS bigint
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT coalesce((
            SELECT s.live_chunks FROM rag.tenant_stat AS s WHERE s.tenant = p_tenant COLLATE "default"
        ), 0)::bigint
    );
END
$fn$;
COMMENT ON FUNCTION rag._live_chunks(text) IS
'Internal: how many live chunks a tenant has (rag.tenant_stat).';

-- A tsquery matching any of the lexemes (already normalised: no dictionary runs again); NULL for none.
-- PL/pgSQL: a LANGUAGE sql function with SET search_path is never inlined and was planned again on every call
-- (two to four per retrieval; issue #10, session 20)
CREATE OR REPLACE FUNCTION rag._any_lexeme(p_lexemes text[])
RETURNS tsquery
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT pg_catalog.string_agg(pg_catalog.array_to_tsvector(ARRAY[l.lexeme])::text, ' | ' ORDER BY l.lexeme)::tsquery
        FROM pg_catalog.unnest(p_lexemes) AS l (lexeme)
        WHERE l.lexeme IS NOT NULL
    );
END
$fn$;
COMMENT ON FUNCTION rag._any_lexeme(text[]) IS
'Internal: the tsquery lexeme1 | lexeme2 | ... of normalised lexemes (NULL for an empty array).';

-- Every candidate of every leg with its per-leg rank and score and the fused score, in total order.
-- Each leg reads a bounded number of rows through an index, whatever the tenant's size:
-- - vector: HNSW through the tenant's own partial index when it has one (rag._index_tenants); else exact up to
--   exact_search_limit live chunks and the table's HNSW index above, with pgvector's iterative scan,
--   rag._ann_fetch candidates (ef_search / 2; 1.5 x ef_search above 100,000 chunks with an own index)
--   re-scored exactly, together with the other legs' chunks (a graph can miss what the question's words find).
--   The choice reads only the tenant's own size: another tenant's ingest never switches it
--   (a filtered scan of the table's graph visits about p_depth * 4 / share rows, so a large tenant with a small
--   share of the table wants its own index).
-- - full text: the tenant's chunks matching the question's rarest lexemes (ascending document frequency,
--   rag.tenant_lexeme) while their frequencies add up to at most p_depth * 10, then ranked by BM25 (the
--   question's lexemes weighted by their idf in the tenant, below); when every lexeme fits, that is every
--   match, exactly as an unbounded leg. If the rarest lexeme alone is over the budget, the newest p_depth * 10
--   chunks with both of the two rarest lexemes are ranked. Their tsvectors are read from rag.chunk_tsv (narrow
--   rows): with the candidates through the tenant's own GIN index there (kept from that scan), else by primary
--   key. When the matches are dense, or the tenant small, the tenant's newest rows there are read and tested
--   instead, until the budget's matches (the same candidates; session 24).
-- - titles: the tenant's distinct titles (rag.tenant_title) sharing a lexeme with the question (the tenant's own
--   partial GIN index, else the table-wide one; a tenant of at most 2,000 chunks reads its titles by primary
--   key), each scored once by word_similarity unless its trigram bound rules it out (below min_title, or below
--   the cut-off of the four titles of the best bounds); of the best titles' chunks only each title's first
--   p_depth in the leg's order are read (rag.chunk_title_order_idx).
CREATE OR REPLACE FUNCTION rag._candidates(
    p_tenant text, p_corrected text, p_qemb public.vector, p_depth integer, p_params jsonb,
    p_question text DEFAULT NULL
)
RETURNS TABLE (
    fused_rank integer, chunk_id bigint, doc_key text, chunk_index integer,
    vec_rank integer, distance float8, fts_rank integer, fts_score float8,
    trgm_rank integer, trgm_score float8, fused_score float8
)
LANGUAGE plpgsql
STABLE
-- PL/pgSQL would cache a generic plan after five calls: for ORDER BY embedding <=> $1 LIMIT n with a tenant
-- filter that plan scans the whole tenant exactly, and a plan made for a large tenant is wrong for a tiny one.
-- So the body chooses per statement (custom plans for the two statements whose plan depends on the tenant,
-- EXECUTE for those that name it; generic for the rest) and the caller's own setting never applies. Generic
-- here: the function's declarations and the functions it calls (the tenant's row, its size, the question's
-- tsqueries, the ANN parameters) inherit the setting, and with force_custom_plan each of their statements was
-- planned again on every call (about 7 plans a call; issue #10, session 20).
SET plan_cache_mode = force_generic_plan
-- Every leg is bounded by an index (a few hundred rows): starting parallel workers costs more (15-20 ms each
-- Gather on the 2-core benchmark machine) than the scans, and JIT compiling (35 ms) more than running.
SET max_parallel_workers_per_gather = 0
SET jit = off
-- Rows are read back by their ctids (the title leg's scored titles, the full-text leg's kept candidates): with a
-- caller's enable_tidscan = off each of those would be a sequential scan of its table (session 26)
SET enable_tidscan = on
-- pgvector's parameters are the function's for its call (the body sets ef_search and iterative_scan with
-- set_config(..., true), which without these stayed in force for the rest of the caller's transaction), and
-- the two it does not set are pgvector's defaults, not the caller's (how far the iterative scan goes, and
-- in how much memory: a tenant's own values chose that; security round 7, docs/security.md)
SET "hnsw.ef_search" = 40
SET "hnsw.iterative_scan" = relaxed_order
SET "hnsw.max_scan_tuples" = 20000
SET "hnsw.scan_mem_multiplier" = 1
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(p_tenant);
    -- A caller may pass the tenant with collation "C" (a function call with a `name` argument such as
    -- current_user collates all its text arguments "C"; the entry points give the question the database's
    -- collation since 0.9.0's session 17), and an index on a text column (default collation) can serve only
    -- comparisons in its own collation: without this every tenant filter below would scan the whole table.
    v_tenant text COLLATE "default" := p_tenant;
    corrected text := p_corrected;
    -- the question's embedding: p_qemb, or (NULL) the one rag._prepare_question began in the background for
    -- p_question, ended by the vector leg once the other legs have run
    qemb public.vector := p_qemb;
    q tsquery := rag._fts_query(t.ts_config, corrected);
    lexemes text [] := pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(t.ts_config, corrected));
    -- the title leg reads the question's first 500 characters (rag._title_question: its cost per title grows
    -- with the question's length), its titles those sharing a lexeme with them
    title_q text := rag._title_question(corrected);
    q_title tsquery := CASE WHEN title_q = corrected THEN rag._any_lexeme(lexemes)
        ELSE rag._any_lexeme(pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(t.ts_config, title_q))) END;
    q_match tsquery := q;
    -- 10 x depth (400 for k <= 10; 25 x until 0.6.0): ts_rank_cd of 1,000 candidates was the largest stage of
    -- a 1 % tenant's retrieval at 1M chunks; with 400 the dev set's answers, citations and statuses were the
    -- same (docs/BENCHMARKS.md, 0.6.0)
    fts_budget bigint := p_depth::bigint * 10;
    rrf_k float8 := (p_params ->> 'rrf_k')::float8;
    w_vec float8 := (p_params ->> 'weight_vector')::float8;
    w_fts float8 := (p_params ->> 'weight_fts')::float8;
    w_trgm float8 := (p_params ->> 'weight_trgm')::float8;
    min_title float8 := (p_params ->> 'min_title_similarity')::float8;
    exact_limit bigint := (p_params ->> 'exact_search_limit')::bigint;
    n_active bigint := rag._live_chunks(p_tenant);
    own_index text := rag._tenant_index_name(p_tenant);
    own_fts boolean := pg_catalog.to_regclass('rag.' || rag._tenant_fts_index_name(p_tenant)) IS NOT NULL;
    -- the title leg reads all of a small tenant's titles (at most its live chunks) rather than the table-wide
    -- GIN index, unless the tenant has its own title index
    scan_titles boolean := n_active <= 2000
        AND pg_catalog.to_regclass('rag.' || rag._tenant_title_index_name(p_tenant)) IS NULL;
    fts_ids bigint [];
    -- each candidate's tsvector as the candidate scan read it from rag.chunk_tsv (the tenant's newest rows or its
    -- own index) when it is stored uncompressed in at most fts_keep_bytes (a chunk's is ~500), else NULL (read by
    -- primary key when ranked): the array holds at most 2 kB a candidate, 0.8 MB for k 10 (the review of session
    -- 25: tsvectors kept whatever their size made a reader's call on a writer's largest chunks peak at 830 MB
    -- instead of 265)
    fts_tsv tsvector [];
    fts_keep_bytes CONSTANT integer := 2048;
    use_ann boolean := false;
    own_ann boolean := false;
    own_dense boolean := false;
    ann_ids bigint [];
    -- the ANN rows' tie-break keys and exact distances, read by the scan itself (see the vector leg)
    ann_keys text [];
    ann_idx integer [];
    ann_raw float8 [];
    -- every leg's chunks with their keys and exact distances: the ANN's (or exact search's) rows and the other
    -- legs' (the vector leg ranks them all on the ANN path; the fused query reads its chunks' keys here)
    all_ids bigint [];
    all_keys text [];
    all_idx integer [];
    all_raw float8 [];
    -- '' in the call's collation (a PL/pgSQL variable takes it: the database's from the entry points since
    -- 0.9.0's session 17, "C" before, when they passed current_user with the question): exact search orders its
    -- doc_keys in it, as the ANN rows' keys (read into ann_keys) are and as before 0.8.0 (the exact and ANN rows
    -- were one UNION ALL of the column and ann_keys)
    call_collation text := '';
    kept text [];
    rarest text;
    second text;
    second_df bigint;
    -- the full-text leg's candidates when its lexemes are dense in the tenant: how many matches, estimated, and
    -- how many of the tenant's newest chunks are read for them (NULL: found through GIN)
    est_matches float8;
    newest_rows bigint;
    n_dropped bigint;
    kept_df bigint;
    -- the question's lexemes found in the tenant, with their inverse document frequencies in it (the full-text
    -- leg's scores)
    q_lex text [];
    q_idf float8 [];
    n_table bigint;
    scan_tenant boolean := false;
    big_share boolean := false;
    ef integer;
    tuned_ef integer;
    -- the question's trigrams (the title leg's bound on word_similarity) and how many
    title_trgm tsvector;
    n_title_trgm integer;
    -- the best titles of the title leg, with their scores
    title_names text [] COLLATE "default";
    -- the titles that can pass min_title, best bound first: where their rows are, their trigrams shared with the
    -- question and their trigrams
    b_tid tid [];
    b_shared integer [];
    b_trgm integer [];
    title_s float8 [];
    -- each leg's chunks in rank order, with their scores
    vec_ids bigint [];
    vec_d float8 [];
    fts_top bigint [];
    fts_s float8 [];
    trgm_ids bigint [];
    trgm_s float8 [];
BEGIN
    -- Each leg is its own statement, each leaving its chunks in arrays in rank order (docs/BENCHMARKS.md,
    -- 0.8.0: planning one statement of all three legs cost more than running it for small tenants). Those
    -- whose best plan is the same for every tenant (primary-key lookups, a tenant's rows through the tenant
    -- index, the arrays) are planned once per connection (generic); the two that choose an index by the tenant
    -- (full-text candidates, titles: a tenant's own partial index, or how big its share is) are planned for
    -- each call, as are EXECUTE's statements (the ANN query, the own full-text index), which name the tenant.
    -- full text: which lexemes choose the candidates (a negated query keeps its own AND semantics)
    IF q IS NOT NULL AND pg_catalog.strpos(q::text, '!') = 0 THEN
        SELECT pg_catalog.array_agg(y.lexeme ORDER BY y.lexeme) FILTER (WHERE y.run <= fts_budget),
            pg_catalog.count(*) FILTER (WHERE y.run > fts_budget),
            (pg_catalog.array_agg(y.lexeme ORDER BY y.df, y.lexeme))[1],
            (pg_catalog.array_agg(y.lexeme ORDER BY y.df, y.lexeme))[2],
            (pg_catalog.array_agg(y.df ORDER BY y.df, y.lexeme))[2],
            coalesce(max(y.run) FILTER (WHERE y.run <= fts_budget), min(y.df))
        INTO kept, n_dropped, rarest, second, second_df, kept_df
        FROM (
            SELECT x.lexeme, x.df, sum(x.df) OVER (ORDER BY x.df, x.lexeme) AS run
            FROM (
                SELECT l.lexeme, coalesce(s.live_chunks, 0) AS df
                FROM pg_catalog.unnest(lexemes) AS l (lexeme)
                LEFT JOIN rag.tenant_lexeme AS s ON s.tenant = v_tenant AND s.lexeme = l.lexeme COLLATE "default"
            ) AS x
            WHERE x.df > 0
        ) AS y;
        IF n_dropped > 0 AND kept IS NOT NULL THEN
            q_match := rag._any_lexeme(kept);
        ELSIF n_dropped > 0 THEN
            -- even the rarest lexeme is in more chunks than the budget (the largest tenant at 1M: ~10,000):
            -- chunks with both of the two rarest (GIN intersects their lists), the newest fts_budget ranked
            q_match := CASE WHEN second IS NULL THEN rag._any_lexeme(ARRAY[rarest])
                ELSE rag._any_lexeme(ARRAY[rarest]) OPERATOR(pg_catalog.&&) rag._any_lexeme(ARRAY[second]) END;
            -- Through GIN every match is fetched to find the newest fts_budget (0.8-1.3 us each: 41 ms for a
            -- lexeme in 54,107 of the largest tenant's 350,000 chunks, 30 ms for "see" and "also" in 22,691).
            -- When the matches are dense, the tenant's newest chunks read in order (~0.55 us each with the test)
            -- reach fts_budget of them sooner: expected after fts_budget * n_active / matches rows, the matches
            -- estimated as the rarest's chunks or, for two, as if the lexemes were independent (words of one
            -- topic occur together more often: found sooner). Tried when that expectation is at most the
            -- estimated matches, reading at most twice it; a scan that ends before fts_budget matches gives way
            -- to GIN, having cost about as much as GIN does for the estimated matches (session 24).
            est_matches := CASE WHEN second IS NULL THEN kept_df::float8
                ELSE kept_df::float8 * second_df / greatest(n_active, 1) END;
            newest_rows := CASE WHEN fts_budget::float8 * n_active <= est_matches * est_matches
                THEN pg_catalog.ceil(2.0 * fts_budget * n_active / est_matches)::bigint END;
        END IF;
        -- The GIN index holds every tenant's chunks: its bitmap for the chosen lexemes costs about their
        -- matches in the whole table (~0.15 us each), about kept_df / share. A small tenant's own rows
        -- filtered by @@ cost less when n^2 * 27 < kept_df * table (measured at ~4 us a row of rag.chunk;
        -- since session 24 they are rag.chunk_tsv's narrow rows, newest first, until the budget's matches:
        -- the scan above with every live chunk of the tenant allowed, which never gives way to GIN). A
        -- tenant's own GIN index holds only its own matches: read as before.
        SELECT sum(s.live_chunks) INTO n_table FROM rag.tenant_stat AS s;
        scan_tenant := n_active::float8 * n_active * 27
            < greatest(coalesce(kept_df, 0), 1)::float8 * coalesce(n_table, 0);
        IF scan_tenant AND NOT own_fts THEN
            newest_rows := greatest(n_active, 1);
        END IF;
        big_share := n_active * 10 >= coalesce(n_table, 0);
    END IF;
    -- full-text leg: the candidates (found through GIN, fetched without reading their tsv), the newest
    -- fts_budget of them ranked (a NULL query matches nothing)
    IF q IS NOT NULL AND q_match IS NOT NULL THEN
        IF newest_rows IS NOT NULL THEN
            -- the tenant's newest live chunks (rag.chunk_tsv's (tenant, chunk_id) index, narrow rows), at most
            -- newest_rows of them, each tested: when fts_budget match, they are the newest fts_budget matches, the
            -- candidates any other path below finds
            SELECT pg_catalog.array_agg(x.chunk_id ORDER BY x.chunk_id DESC),
                pg_catalog.array_agg(CASE WHEN pg_catalog.pg_column_size(x.tsv) <= fts_keep_bytes
                    AND pg_catalog.pg_column_compression(x.tsv) IS NULL THEN x.tsv END ORDER BY x.chunk_id DESC)
            INTO fts_ids, fts_tsv
            FROM (
                SELECT r.chunk_id, r.tsv FROM (
                    SELECT w.chunk_id, w.tsv FROM rag.chunk_tsv AS w
                    WHERE w.tenant = v_tenant
                    ORDER BY w.chunk_id DESC
                    LIMIT newest_rows
                ) AS r
                WHERE r.tsv @@ q_match
                ORDER BY r.chunk_id DESC
                LIMIT fts_budget
            ) AS x;
            -- fewer than fts_budget: every match unless the scan stopped short of the tenant's live chunks
            IF coalesce(pg_catalog.cardinality(fts_ids), 0) < fts_budget AND newest_rows < n_active THEN
                fts_ids := NULL;
                fts_tsv := NULL;
                newest_rows := NULL;
            END IF;
        END IF;
        -- else through GIN
        IF newest_rows IS NULL THEN
            PERFORM pg_catalog.set_config('plan_cache_mode', 'force_custom_plan', true);
            IF own_fts THEN
                -- the tenant's own partial GIN index on rag.chunk_tsv (rag._index_tenants): its bitmap holds only
                -- the tenant's matches, its narrow rows (live chunks only) give the candidates' ids and tsvectors
                -- (those kept: fts_tsv), which the ranking below reads from the array rather than from the table
                -- again (issue #10, session 25; by ctid since session 21). The tenant is a literal, so the planner
                -- proves the index's predicate; OFFSET 0 keeps a plan from reading the table in chunk_id order.
                -- When even the rarest lexeme is over the budget (kept is NULL: the matches of the two rarest, or
                -- of the rarest alone, may be thousands), the sort carries each match's ctid instead of its
                -- tsvector, and the rows of the newest fts_budget are read back in one TID scan of those ctids
                -- (the same row versions: one statement, one snapshot; the tenant tested again all the same):
                -- "b tree" in the largest tenant at 1M (5,524 matches) 10.5-12.9 -> 7.4 ms; ~0.1 ms more for
                -- 200-400 matches (issue #10, session 26).
                EXECUTE pg_catalog.format(CASE WHEN kept IS NULL THEN
                    'SELECT pg_catalog.array_agg(r.chunk_id ORDER BY r.chunk_id DESC),'
                    ' pg_catalog.array_agg(CASE WHEN pg_catalog.pg_column_size(r.tsv) OPERATOR(pg_catalog.<=) $3'
                    ' AND pg_catalog.pg_column_compression(r.tsv) IS NULL THEN r.tsv END ORDER BY r.chunk_id DESC)'
                    ' FROM rag.chunk_tsv AS r WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY('
                    ' SELECT m.tid FROM ('
                    ' SELECT t.chunk_id, t.ctid AS tid FROM rag.chunk_tsv AS t WHERE t.tenant = %1$L'
                    ' AND t.tsv OPERATOR(pg_catalog.@@) $1 OFFSET 0) AS m'
                    ' ORDER BY m.chunk_id DESC LIMIT $2)) AND r.tenant = %1$L'
                ELSE
                    'SELECT pg_catalog.array_agg(x.chunk_id ORDER BY x.chunk_id DESC),'
                    ' pg_catalog.array_agg(x.tsv ORDER BY x.chunk_id DESC) FROM ('
                    ' SELECT m.chunk_id, m.tsv FROM ('
                    ' SELECT t.chunk_id, CASE WHEN pg_catalog.pg_column_size(t.tsv) OPERATOR(pg_catalog.<=) $3'
                    ' AND pg_catalog.pg_column_compression(t.tsv) IS NULL THEN t.tsv END AS tsv'
                    ' FROM rag.chunk_tsv AS t WHERE t.tenant = %L'
                    ' AND t.tsv OPERATOR(pg_catalog.@@) $1 OFFSET 0) AS m'
                    ' ORDER BY m.chunk_id DESC LIMIT $2) AS x' END, p_tenant)
                INTO fts_ids, fts_tsv USING q_match, fts_budget, fts_keep_bytes;
            ELSIF big_share THEN
                -- a tenant with a tenth of the table or more: the tenant test a filter (IS TRUE), not a bitmap of
                -- the tenant index (350,000 rows at 1M, 13 ms) to AND with GIN's
                WITH m AS MATERIALIZED (
                    SELECT c.chunk_id FROM rag.chunk AS c
                    WHERE c.tsv @@ q_match AND c.retired_at IS NULL AND (c.tenant = v_tenant) IS TRUE
                )
                SELECT pg_catalog.array_agg(x.chunk_id) INTO fts_ids
                FROM (SELECT m.chunk_id FROM m ORDER BY m.chunk_id DESC LIMIT fts_budget) AS x;
            ELSE
                WITH m AS MATERIALIZED (
                    SELECT c.chunk_id FROM rag.chunk AS c
                    WHERE c.tenant = v_tenant AND c.retired_at IS NULL AND c.tsv @@ q_match
                )
                SELECT pg_catalog.array_agg(x.chunk_id) INTO fts_ids
                FROM (SELECT m.chunk_id FROM m ORDER BY m.chunk_id DESC LIMIT fts_budget) AS x;
            END IF;
            PERFORM pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
        END IF;
        -- the question's lexemes the tenant has, each with its idf in the tenant: ln(1 + (N - df + 0.5) / (df + 0.5)),
        -- N the tenant's live chunks, df those holding the lexeme (rag.tenant_lexeme: no other tenant's counts)
        SELECT pg_catalog.array_agg(x.lexeme ORDER BY x.lexeme),
            pg_catalog.array_agg(ln(1 + (n_active - x.df + 0.5) / (x.df + 0.5)) ORDER BY x.lexeme)
        INTO q_lex, q_idf
        FROM (
            SELECT l.lexeme, s.live_chunks::float8 AS df
            FROM pg_catalog.unnest(lexemes) AS l (lexeme)
            INNER JOIN rag.tenant_lexeme AS s ON s.tenant = v_tenant AND s.lexeme = l.lexeme COLLATE "default"
            WHERE s.live_chunks > 0
        ) AS x;
        -- each candidate's tsv read from rag.chunk_tsv's narrow rows (not rag.chunk's ~2.9 kB ones) and scored by
        -- BM25 without length normalisation (k1 1.2, b 0; chunks are bounded in size by the chunker): the sum over
        -- the question's lexemes in the chunk of idf x 2.2 tf / (tf + 1.2), tf its occurrences (positions) in the
        -- chunk. Until 0.9.0 ts_rank_cd, which weighs every word of the question alike: a rare word the fact's chunk
        -- shares with the question counted no more than "table" (#11 session 14, docs/BENCHMARKS.md). Only the
        -- candidates scoring at least the p_depth-th best score (ties included) need their tie-break keys from
        -- rag.chunk
        WITH scored AS MATERIALIZED (
            -- one aggregate over every candidate's terms, not one per candidate, a term's idf found by its place
            -- in q_lex (no join): 0.6 ms less for 400 candidates (issue #10, session 22). Each term is rounded to
            -- a multiple of 2^-36 first, so the float8 sum is exact whatever order the plan hands a candidate's
            -- terms to the aggregate in (a sort is not stable): a term is under 2^6 (idf at most ln(1 + N / 1.5),
            -- under 22 for N < 2^31 chunks, times 2.2) and a question has under 2^11 lexemes, so every partial sum is
            -- an integer times 2^-36 under 2^53 of them. The rounding moves a term by at most 2^-37 (7e-12),
            -- far below the score's 6 decimals (numeric's exact sum did the same for 0.2 ms more)
            SELECT m.chunk_id,
                round(pg_catalog.sum(round(
                    68719476736::float8 * q_idf[pg_catalog.array_position(q_lex, (m.tv).lexeme)] * 2.2
                    * coalesce(pg_catalog.array_length((m.tv).positions, 1), 1)::float8
                    / (coalesce(pg_catalog.array_length((m.tv).positions, 1), 1)::float8 + 1.2)
                ) / 68719476736::float8)::numeric, 6)::float8 AS s
            FROM (
                -- only the question's lexemes, with their positions: a tsvector holds weights A (title) and D
                -- (content) only (rag.chunk.tsv is generated so), so marking the question's lexemes B and keeping
                -- the B ones keeps exactly them (C functions on the tsvector: 1.1 instead of 6.9 ms for 400
                -- candidates of ~46 lexemes; every lexeme of a tsvector the server made has a position). A
                -- candidate without any is not scored (it cannot be one: it matched a lexeme of q_lex). Unnested
                -- in the target list: no function scan set up again for each candidate
                SELECT x.chunk_id, pg_catalog.unnest(pg_catalog.ts_filter(
                    pg_catalog.setweight(x.tsv, 'B', q_lex), '{b}'
                )) AS tv
                FROM (
                    -- the candidate's tsvector as its scan read it, else by primary key from rag.chunk_tsv
                    SELECT u.chunk_id, coalesce(
                        u.tsv, (SELECT v.tsv FROM rag.chunk_tsv AS v WHERE v.chunk_id = u.chunk_id)
                    ) AS tsv
                    FROM ROWS FROM (pg_catalog.unnest(fts_ids), pg_catalog.unnest(fts_tsv)) AS u (chunk_id, tsv)
                    OFFSET 0
                ) AS x
                WHERE x.tsv @@ q
            ) AS m
            GROUP BY m.chunk_id
        )
        SELECT pg_catalog.array_agg(f.chunk_id ORDER BY f.s DESC, f.doc_key, f.chunk_index, f.chunk_id),
            pg_catalog.array_agg(f.s ORDER BY f.s DESC, f.doc_key, f.chunk_index, f.chunk_id)
        INTO fts_top, fts_s
        FROM (
            SELECT x.chunk_id, c.doc_key, c.chunk_index, x.s
            FROM scored AS x
            CROSS JOIN LATERAL (
                SELECT k.doc_key, k.chunk_index FROM rag.chunk AS k WHERE k.chunk_id = x.chunk_id OFFSET 0
            ) AS c
            WHERE x.s >= coalesce((
                SELECT y.s FROM scored AS y ORDER BY y.s DESC LIMIT 1 OFFSET p_depth - 1
            ), '-Infinity'::float8)
            ORDER BY x.s DESC, c.doc_key, c.chunk_index, x.chunk_id
            LIMIT p_depth
        ) AS f;
    END IF;

    -- title leg: each distinct title of the tenant sharing a lexeme with the question, scored once
    -- (a tenant with its own title index, rag._index_tenants, reads it: the planner proves its predicate; a
    -- small tenant without one reads all its titles by primary key and tests them, OFFSET 0 keeping @@ out of
    -- the scan: ~100 titles of a 400-chunk tenant in 0.1-0.2 ms against 1.4-1.7 ms for the table-wide GIN
    -- index's bitmap of every tenant's matching titles at 1M chunks), then the chunks of the best titles
    IF q_title IS NOT NULL THEN
        -- A title's word_similarity with the question is at most the share of the title's trigrams that the
        -- question has (pg_trgm: shared trigrams of the best extent / the title's trigrams, or less): a title
        -- whose share is below min_title (less a millionth for the score's rounding) cannot pass the cut-off, and
        -- its word_similarity (~30 us for a 160-character question) is not computed. The share costs ~3 us: the
        -- question's trigrams as a tsvector, less those of the title (rag.tenant_title.trgm), by binary search
        -- (1M chunks: 11,380 -> 3,426 titles scored for the largest tenant's 100 questions; issue #10, session 21)
        title_trgm := pg_catalog.array_to_tsvector(public.show_trgm(title_q));
        n_title_trgm := pg_catalog.length(title_trgm);
        PERFORM pg_catalog.set_config('plan_cache_mode', 'force_custom_plan', true);
        -- the titles that can pass min_title, in the order of their bound (the share), with how many of their
        -- trigrams the question has, each by where its row is (ctid): the arrays hold 14 bytes a title however long
        -- it is, sorted once (planned for the call: which index depends on the tenant)
        SELECT pg_catalog.array_agg(u.tid ORDER BY u.rn), pg_catalog.array_agg(u.n_shared ORDER BY u.rn),
            pg_catalog.array_agg(u.n_trgm ORDER BY u.rn)
        INTO b_tid, b_shared, b_trgm
        FROM (
            SELECT v.tid, v.n_shared, v.n_trgm,
                pg_catalog.row_number() OVER (ORDER BY v.n_shared::float8 / greatest(v.n_trgm, 1) DESC, v.title) AS rn
            FROM (
                SELECT x.ctid AS tid, x.title,
                    n_title_trgm - pg_catalog.length(pg_catalog.ts_delete(title_trgm, x.trgm)) AS n_shared,
                    pg_catalog.cardinality(x.trgm) AS n_trgm
                FROM rag.tenant_title AS x
                WHERE NOT scan_titles AND x.tenant = v_tenant AND x.live_chunks > 0 AND x.tsv @@ q_title
                    AND n_title_trgm - pg_catalog.length(pg_catalog.ts_delete(title_trgm, x.trgm))
                    >= (min_title - 1e-6) * pg_catalog.cardinality(x.trgm)
                UNION ALL
                SELECT y.tid, y.title,
                    n_title_trgm - pg_catalog.length(pg_catalog.ts_delete(title_trgm, y.trgm)),
                    pg_catalog.cardinality(y.trgm)
                FROM (
                    SELECT x.ctid AS tid, x.title, x.tsv, x.trgm FROM rag.tenant_title AS x
                    WHERE scan_titles AND x.tenant = v_tenant AND x.live_chunks > 0
                    OFFSET 0
                ) AS y
                WHERE y.tsv @@ q_title
                    AND n_title_trgm - pg_catalog.length(pg_catalog.ts_delete(title_trgm, y.trgm))
                    >= (min_title - 1e-6) * pg_catalog.cardinality(y.trgm)
            ) AS v
        ) AS u;
        PERFORM pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
        -- The four titles of the best bounds are scored first: when those passing min_title hold p_depth chunks,
        -- the cut-off below among them (the score of the title at which their chunk counts reach p_depth) is no
        -- higher than among all titles (more titles only push that title down), so a title whose bound is under
        -- it can neither pass the cut-off nor move it (it comes after that title), and is not scored: of the
        -- largest tenant's 3,426 titles that could pass min_title for its 100 benchmark questions at 1M, 492 are
        -- scored, at most 29 for one question instead of 136 (issue #10, session 25). A scored title's row is read
        -- again where it was found: this STABLE function's statements all run under the calling statement's
        -- snapshot, in which that row version stays (an ingest's update of the title's count makes a new one,
        -- elsewhere, that this snapshot does not see; VACUUM may not remove the old one). Planned once (arrays).
        WITH bounded AS (
            SELECT b.tid, b.n_shared, b.n_trgm, b.rn
            FROM ROWS FROM (pg_catalog.unnest(b_tid), pg_catalog.unnest(b_shared), pg_catalog.unnest(b_trgm))
                WITH ORDINALITY AS b (tid, n_shared, n_trgm, rn)
        ),
        first AS MATERIALIZED (
            SELECT (x.r).title, (x.r).live_chunks,
                round(public.word_similarity((x.r).stripped, title_q)::numeric, 6)::float8 AS s
            FROM (
                -- each row by its ctid (a subquery per title: no plan can turn it into a scan of the table)
                SELECT (SELECT r FROM rag.tenant_title AS r WHERE r.ctid = b.tid AND r.tenant = v_tenant) AS r
                FROM bounded AS b
                WHERE b.rn <= 4
                OFFSET 0
            ) AS x
            WHERE (x.r).title IS NOT NULL
        ),
        first_cut AS (
            SELECT min(y.s) AS cut FROM (
                SELECT z.s, z.live_chunks, sum(z.live_chunks) OVER (ORDER BY z.s DESC, z.title) AS upto
                FROM first AS z WHERE z.s >= min_title
            ) AS y
            WHERE y.upto - y.live_chunks < p_depth
            HAVING max(y.upto) >= p_depth
        ),
        scored AS (
            SELECT f.title, f.live_chunks, f.s FROM first AS f
            UNION ALL
            SELECT (x.r).title, (x.r).live_chunks,
                round(public.word_similarity((x.r).stripped, title_q)::numeric, 6)::float8
            FROM (
                SELECT (SELECT r FROM rag.tenant_title AS r WHERE r.ctid = b.tid AND r.tenant = v_tenant) AS r
                FROM bounded AS b
                WHERE b.rn > 4
                    AND b.n_shared >= (coalesce((SELECT c.cut FROM first_cut AS c), min_title) - 1e-6) * b.n_trgm
                OFFSET 0
            ) AS x
            WHERE (x.r).title IS NOT NULL
        ),
        -- only the best titles can hold the leg's p_depth chunks: those scoring at least the title at which
        -- the titles' chunk counts (best first) reach p_depth (ties included), so no more chunks are read
        titles AS (
            SELECT sc.title, sc.s FROM scored AS sc
            WHERE sc.s >= min_title AND sc.s >= coalesce((
                SELECT min(y.s) FROM (
                    SELECT z.s, sum(z.live_chunks) OVER (ORDER BY z.s DESC, z.title) - z.live_chunks AS before
                    FROM scored AS z WHERE z.s >= min_title
                ) AS y WHERE y.before < p_depth
            ), 2)
        )
        SELECT pg_catalog.array_agg(ti.title), pg_catalog.array_agg(ti.s)
        INTO title_names, title_s
        FROM titles AS ti;
        -- their chunks: of each title its first p_depth in the leg's order (doc_key, chunk_index, chunk_id), read in
        -- that order from rag.chunk_title_order_idx (tenant, the title's hash, doc_key, chunk_index, chunk_id), not
        -- all of them: a title such as "Parameters" heads 12,177 of the largest tenant's chunks at 1M, read and
        -- sorted for 9.6 ms (issue #10, session 24). The hash keeps the keys short (a title may have 2,400 bytes);
        -- the title itself is tested on the row. Chunks of a doc_key over 2,048 bytes (stored before 0.9.0) are
        -- in rag.chunk_title_long_key_idx (migration 020), read as before.
        SELECT pg_catalog.array_agg(g.chunk_id ORDER BY g.s DESC, g.doc_key, g.chunk_index, g.chunk_id),
            pg_catalog.array_agg(g.s ORDER BY g.s DESC, g.doc_key, g.chunk_index, g.chunk_id)
        INTO trgm_ids, trgm_s
        FROM (
            SELECT c.chunk_id, c.doc_key, c.chunk_index, ti.s
            FROM ROWS FROM (pg_catalog.unnest(title_names), pg_catalog.unnest(title_s)) AS ti (title, s)
            CROSS JOIN LATERAL (
                (
                    SELECT k.chunk_id, k.doc_key, k.chunk_index FROM rag.chunk AS k
                    WHERE k.tenant = v_tenant AND k.retired_at IS NULL
                        AND pg_catalog.octet_length(k.doc_key) <= 2048
                        AND pg_catalog.hashtextextended(k.title, 0) = pg_catalog.hashtextextended(ti.title, 0)
                        AND k.title = ti.title
                    ORDER BY k.doc_key, k.chunk_index, k.chunk_id
                    LIMIT p_depth
                )
                UNION ALL
                (
                    SELECT k.chunk_id, k.doc_key, k.chunk_index FROM rag.chunk AS k
                    WHERE k.tenant = v_tenant AND k.retired_at IS NULL
                        AND pg_catalog.octet_length(k.doc_key) > 2048 AND k.title = ti.title
                    ORDER BY k.doc_key, k.chunk_index, k.chunk_id
                    LIMIT p_depth
                )
            ) AS c
            WHERE ti.s >= min_title
            ORDER BY ti.s DESC, c.doc_key, c.chunk_index, c.chunk_id
            LIMIT p_depth
        ) AS g;
    END IF;

    -- vector leg (after the others: with pgcite_python the question's embedding was begun in the background,
    -- and the full-text and title legs ran while the worker thread computed it)
    IF qemb IS NULL THEN
        IF p_question IS NULL THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = 'rag._candidates needs the question''s embedding or the question';
        END IF;
        qemb := rag._query_embedding(p_question, corrected, NULL);
    END IF;
    IF pg_catalog.to_regclass('rag.' || own_index) IS NOT NULL THEN
        use_ann := true;
        own_ann := true;
    ELSE
        -- decided by this tenant's own size alone: a rule reading the table's size would let another tenant's
        -- ingest switch this tenant between exact and approximate search (and make rag.replay disagree)
        use_ann := n_active > exact_limit;
    END IF;
    IF use_ann THEN
        -- HNSW with pgvector's iterative scan, so the tenant filter never starves the result; over-fetch,
        -- then every candidate is re-scored exactly below. The tenant is a literal, so the planner can
        -- prove the predicate of the tenant's own partial index.
        -- ef_search and over-fetch measured at 1M chunks (docs/BENCHMARKS.md, 0.5.0): with 200 / 160 the
        -- vector leg's recall@10 was 0.942 for a 350,000-chunk tenant, one question 0.0 (its near-copies
        -- form clusters the greedy search misses); 800 / 400 gave 1.000, and 400 / 200 1.000 at 10,000
        -- A tenant of over 100,000 chunks with its own index fetches 1.5 x ef rows: past the first ef the
        -- iterative scan goes on searching the graph, which reaches clusters of near-copies the first pass
        -- missed (0.9.0, 1M chunks: recall@10 0.977 -> 0.990 for a 350,000-chunk tenant; no ef_search up to
        -- pgvector's 1,000 alone got there, docs/BENCHMARKS.md). Every value is the function's own (SET above,
        -- set_config local to the call): no session setting of the caller changes how far the scan goes.
        PERFORM pg_catalog.set_config('hnsw.iterative_scan', 'relaxed_order', true);
        IF own_ann THEN
            own_dense := rag._index_is_dense(pg_catalog.to_regclass('rag.' || own_index));
            -- the search measured on this graph (rag._tune_ann), if it was
            tuned_ef := rag._tuned_ef(v_tenant, own_index);
        END IF;
        ef := rag._ann_search(n_active, p_depth, own_dense, tuned_ef);
        PERFORM pg_catalog.set_config('hnsw.ef_search', ef::text, true);
        -- each row's exact distance and tie-break keys come from the heap tuple the scan fetches anyway, so
        -- the re-score needs no second lookup of the fetched rows by primary key (docs/BENCHMARKS.md, 0.7.0)
        EXECUTE pg_catalog.format(
            'SELECT pg_catalog.array_agg(a.chunk_id), pg_catalog.array_agg(a.doc_key),'
            ' pg_catalog.array_agg(a.chunk_index), pg_catalog.array_agg(a.raw) FROM ('
            ' SELECT c.chunk_id, c.doc_key, c.chunk_index, c.embedding OPERATOR(public.<=>) $1 AS raw'
            ' FROM rag.chunk AS c WHERE c.tenant = %L AND c.retired_at IS NULL'
            ' ORDER BY c.embedding OPERATOR(public.<=>) $1 LIMIT $2) AS a', p_tenant)
        INTO ann_ids, ann_keys, ann_idx, ann_raw USING qemb, rag._ann_rows(n_active, ef, own_ann);
        IF coalesce(pg_catalog.cardinality(ann_ids), 0) < least(n_active, p_depth) THEN
            ann_ids := NULL;  -- the index could not deliver enough rows: fall back to exact search
        END IF;
    END IF;

    -- Every leg's chunks with their tie-break keys and exact distances (all_*): the ANN's rows from its scan, or
    -- exact search's nearest p_depth from theirs, then the other legs' chunks not among them by primary key.
    IF ann_ids IS NOT NULL THEN
        all_ids := ann_ids;
        all_keys := ann_keys;
        all_idx := ann_idx;
        all_raw := ann_raw;
    ELSE
        -- exact search of the tenant's live chunks (no ANN index, or it delivered too few rows): the distances
        -- are computed in a subquery (OFFSET 0), so no plan can read them in the order of an HNSW index
        SELECT coalesce(
            pg_catalog.array_agg(e.chunk_id ORDER BY e.raw, e.doc_key, e.chunk_index, e.chunk_id), '{}'),
            pg_catalog.array_agg(e.doc_key ORDER BY e.raw, e.doc_key, e.chunk_index, e.chunk_id),
            pg_catalog.array_agg(e.chunk_index ORDER BY e.raw, e.doc_key, e.chunk_index, e.chunk_id),
            pg_catalog.array_agg(e.raw ORDER BY e.raw, e.doc_key, e.chunk_index, e.chunk_id)
        INTO all_ids, all_keys, all_idx, all_raw
        FROM (
            SELECT d.chunk_id, d.doc_key, d.chunk_index, d.raw
            FROM (
                SELECT c.chunk_id, c.doc_key || call_collation AS doc_key, c.chunk_index,
                    c.embedding OPERATOR(public.<=>) qemb AS raw
                FROM rag.chunk AS c
                WHERE c.retired_at IS NULL AND c.tenant = v_tenant
                OFFSET 0
            ) AS d
            ORDER BY d.raw, d.doc_key, d.chunk_index, d.chunk_id
            LIMIT p_depth
        ) AS e;
    END IF;
    -- (LATERAL ... OFFSET 0, which no plan can turn into a scan of the tenant)
    SELECT all_ids || coalesce(pg_catalog.array_agg(k.chunk_id ORDER BY k.chunk_id), '{}'),
        all_keys || coalesce(pg_catalog.array_agg(k.doc_key ORDER BY k.chunk_id), '{}'),
        all_idx || coalesce(pg_catalog.array_agg(k.chunk_index ORDER BY k.chunk_id), '{}'),
        all_raw || coalesce(pg_catalog.array_agg(k.raw ORDER BY k.chunk_id), '{}')
    INTO all_ids, all_keys, all_idx, all_raw
    FROM (
        SELECT DISTINCT o.id
        FROM pg_catalog.unnest(coalesce(fts_top, '{}') || coalesce(trgm_ids, '{}')) AS o (id)
        WHERE NOT o.id = ANY (all_ids)
    ) AS x
    CROSS JOIN LATERAL (
        SELECT c.chunk_id, c.doc_key, c.chunk_index, c.embedding OPERATOR(public.<=>) qemb AS raw
        FROM rag.chunk AS c
        WHERE c.chunk_id = x.id
        OFFSET 0
    ) AS k;
    -- vector leg: the nearest p_depth of them by exact distance (a top-N sort over floats), rounded only then.
    -- Through an index that is its candidates and the other legs' chunks it did not return: a graph can miss a
    -- region that the question's words find (0.9.0, session 17: a question far from every chunk of a
    -- 350,000-chunk tenant had 9 of its 10 nearest out of the graph's reach at any ef_search, 3 of them among the
    -- full-text leg's best), and a chunk nearer than the index's p_depth-th is one of the tenant's nearest
    -- whichever leg found it. After exact search the other legs' chunks all come after its p_depth: the same rows.
    SELECT pg_catalog.array_agg(w.chunk_id ORDER BY w.d, w.doc_key, w.chunk_index, w.chunk_id),
        pg_catalog.array_agg(w.d ORDER BY w.d, w.doc_key, w.chunk_index, w.chunk_id)
    INTO vec_ids, vec_d
    FROM (
        SELECT a.chunk_id, a.doc_key, a.chunk_index, round(a.raw::numeric, 6)::float8 AS d
        FROM ROWS FROM (
            pg_catalog.unnest(all_ids), pg_catalog.unnest(all_keys), pg_catalog.unnest(all_idx),
            pg_catalog.unnest(all_raw)
        ) AS a (chunk_id, doc_key, chunk_index, raw)
        ORDER BY a.raw, a.doc_key, a.chunk_index, a.chunk_id
        LIMIT p_depth
    ) AS w;

    -- fused: the legs' arrays (rank = position) and each chunk's keys and distance from all_* (doc_key ordered
    -- in the column's collation, as when they were read here by primary key), planned generic
    RETURN QUERY
    SELECT
        pg_catalog.row_number() OVER (
            ORDER BY f.fused DESC, k.doc_key COLLATE "default", k.chunk_index, f.chunk_id)::integer,
        f.chunk_id, k.doc_key, k.chunk_index, f.vr, coalesce(f.d, round(k.raw::numeric, 6)::float8), f.fr, f.fs,
        f.tr, f.ts, f.fused
    FROM (
        SELECT ids.chunk_id,
            lv.r::integer AS vr, lv.d, lf.r::integer AS fr, lf.s AS fs, lt.r::integer AS tr, lt.s AS ts,
            round((
                coalesce(w_vec / (rrf_k + lv.r), 0)
                + coalesce(w_fts / (rrf_k + lf.r), 0)
                + coalesce(w_trgm / (rrf_k + lt.r), 0)
            )::numeric, 9)::float8 AS fused
        FROM (
            SELECT pg_catalog.unnest(vec_ids) UNION SELECT pg_catalog.unnest(fts_top)
            UNION SELECT pg_catalog.unnest(trgm_ids)
        ) AS ids (chunk_id)
        LEFT JOIN ROWS FROM (pg_catalog.unnest(vec_ids), pg_catalog.unnest(vec_d))
            WITH ORDINALITY AS lv (chunk_id, d, r)
            ON lv.chunk_id = ids.chunk_id
        LEFT JOIN ROWS FROM (pg_catalog.unnest(fts_top), pg_catalog.unnest(fts_s))
            WITH ORDINALITY AS lf (chunk_id, s, r)
            ON lf.chunk_id = ids.chunk_id
        LEFT JOIN ROWS FROM (pg_catalog.unnest(trgm_ids), pg_catalog.unnest(trgm_s))
            WITH ORDINALITY AS lt (chunk_id, s, r)
            ON lt.chunk_id = ids.chunk_id
    ) AS f
    INNER JOIN ROWS FROM (
        pg_catalog.unnest(all_ids), pg_catalog.unnest(all_keys), pg_catalog.unnest(all_idx),
        pg_catalog.unnest(all_raw)
    ) AS k (chunk_id, doc_key, chunk_index, raw)
        ON k.chunk_id = f.chunk_id
    ORDER BY f.fused DESC, k.doc_key COLLATE "default", k.chunk_index, f.chunk_id;
END
$fn$;
COMMENT ON FUNCTION rag._candidates(text, text, public.vector, integer, jsonb, text) IS
'Internal: candidates of the vector, full-text and title-trigram legs (p_depth each, each read through an '
'index) for a spell-corrected question, fused by weighted reciprocal rank fusion, in total order. p_params: '
'rag._params() (rrf_k, weight_*, exact_search_limit, ...).';

CREATE OR REPLACE FUNCTION rag._retrieve(
    p_caller name, p_question text, p_tenant text, p_k integer, p_query_embedding public.vector
)
RETURNS TABLE (
    rank integer, chunk_id bigint, doc_key text, doc_version integer, chunk_index integer, anchor text,
    title text, content text, distance float8, trgm_score float8, fts_score float8, fused_score float8
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    params jsonb := rag._params();
    p record;
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'read');
    p := rag._prepare_question(p_question, p_tenant, p_k, p_query_embedding, params);
    IF NOT p.has_question THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.fused_rank, c.chunk_id, c.doc_key, c.doc_version, c.chunk_index, c.anchor, c.title, c.content,
        x.distance, x.trgm_score, x.fts_score, x.fused_score
    FROM rag._candidates(p_tenant, p.corrected, p.qemb, greatest(p_k * 4, 40), params, p_question) AS x
    INNER JOIN rag.chunk AS c ON c.chunk_id = x.chunk_id
    WHERE x.fused_rank <= p_k
    ORDER BY x.fused_rank;
END
$fn$;
COMMENT ON FUNCTION rag._retrieve(name, text, text, integer, public.vector) IS
'Internal (SECURITY DEFINER: reads embeddings, which tenant roles cannot): rag.retrieve for the checked caller.';

CREATE OR REPLACE FUNCTION rag.retrieve(
    question text, tenant text, k integer DEFAULT 8, query_embedding public.vector DEFAULT NULL
)
RETURNS TABLE (
    rank integer, chunk_id bigint, doc_key text, doc_version integer, chunk_index integer, anchor text,
    title text, content text, distance float8, trgm_score float8, fts_score float8, fused_score float8
)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    -- the question in the database's collation (current_user, a `name`, would make every text argument "C", in
    -- which regular expressions and lower() read only ASCII letters as letters: 0.9.0, session 17)
    SELECT * FROM rag._retrieve(
        current_user, retrieve.question COLLATE "default", retrieve.tenant, retrieve.k, retrieve.query_embedding
    )
$fn$;
COMMENT ON FUNCTION rag.retrieve(text, text, integer, public.vector) IS
'The k best chunks of a tenant for a question: vector (HNSW or exact), full-text and trigram legs fused by '
'reciprocal rank fusion, ties broken by (doc_key, chunk_index, chunk_id). Deterministic for a given corpus.';

GRANT EXECUTE ON FUNCTION rag.retrieve(text, text, integer, public.vector) TO pgcite_reader;
