-- Retrieve: three legs (vector, full text, trigram) fused by reciprocal rank fusion, with a total order.
-- Every ordering ends in (doc_key, chunk_index, chunk_id) and every score is rounded before it orders,
-- so float noise, plans, VACUUM and REINDEX cannot change the result.

CREATE OR REPLACE FUNCTION rag._check_question(question text, k integer)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF k IS NULL OR k < 1 OR k > 100 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('k must be between 1 and 100, not %s', coalesce(k::text, 'NULL'));
    END IF;
    IF pg_catalog.length(question) > 4000 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('question is %s characters, over the limit of 4000',
                pg_catalog.length(question)),
            HINT = 'Ask a shorter question: retrieval works on the gist, not on whole documents.';
    END IF;
    RETURN question IS NOT NULL AND pg_catalog.btrim(question, E' \t\n\r\f\x0B') <> '';
END
$fn$;
COMMENT ON FUNCTION rag._check_question(text, integer) IS
'Internal: 22023 for k outside 1..100, 54000 for a question over 4000 characters; false when it is empty.';

-- The question's embedding: the caller's (checked), or computed once in-database by rag.embed
-- (of the typo-corrected question when a word was corrected: MiniLM cannot read "vacum").
CREATE OR REPLACE FUNCTION rag._query_embedding(question text, corrected text, query_embedding public.vector)
RETURNS public.vector
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v public.vector;
BEGIN
    IF query_embedding IS NOT NULL THEN
        IF public.vector_dims(query_embedding) <> 384 THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = pg_catalog.format('query_embedding has %s dimensions, expected 384',
                    public.vector_dims(query_embedding)),
                HINT = 'Embed the question with all-MiniLM-L6-v2 (384 dimensions), or pass NULL.';
        END IF;
        -- pgvector refuses NaN and infinity; an all-zero vector has no direction (its cosine distance is NaN),
        -- nor one whose squares vanish or overflow in single precision (rag._has_direction)
        IF public.vector_norm(query_embedding) = 'Infinity'::float8 OR NOT rag._has_direction(query_embedding) THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = 'query_embedding must be a non-zero vector of finite numbers',
                HINT = 'Embed the question with all-MiniLM-L6-v2 (384 dimensions), or pass NULL to embed it in '
                    || 'the database.';
        END IF;
        RETURN query_embedding;
    END IF;
    IF pg_catalog.to_regprocedure('rag._embed_end(text)') IS NOT NULL THEN
        -- the worker's vector when rag._prepare_question began this text in the background, else embedded now
        EXECUTE 'SELECT rag._embed_end($1)' INTO v USING rag._embedding_text(question, corrected);
        RETURN v;
    END IF;
    IF pg_catalog.to_regprocedure('rag.embed(text)') IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'no query_embedding given and in-database embedding is not installed',
            HINT = 'Pass query_embedding (all-MiniLM-L6-v2, 384 dims) or CREATE EXTENSION pgcite_python.';
    END IF;
    EXECUTE 'SELECT rag.embed($1)' INTO v USING rag._embedding_text(question, corrected);
    RETURN v;
END
$fn$;
COMMENT ON FUNCTION rag._query_embedding(text, text, public.vector) IS
'Internal (pgcite_owner only): checks a supplied query embedding (22023 unless 384 finite dims, not all zero) '
'or embeds the question once (the background job rag._prepare_question began, when there is one).';

-- The text embedded for a question: the corrected question if a word was corrected, else the question.
CREATE OR REPLACE FUNCTION rag._embedding_text(p_question text, p_corrected text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT CASE WHEN p_corrected = x.plain THEN p_question ELSE p_corrected END
        FROM (
            SELECT coalesce(pg_catalog.string_agg(m.a[1], ' ' ORDER BY m.n), '') AS plain
            FROM pg_catalog.regexp_matches(pg_catalog.lower(p_question), '[[:alnum:]_]+', 'g') WITH ORDINALITY
                AS m (a, n)
        ) AS x
    );
END
$fn$;
COMMENT ON FUNCTION rag._embedding_text(text, text) IS
'Internal: the question as it is embedded (typo-corrected when a word was unknown to the tenant''s corpus).';

-- websearch syntax, but terms are OR-ed (a natural question rarely has every word in one chunk);
-- a query with a negation keeps its AND semantics.
-- A question's full-text query has at most 256 search terms (security round 11): ts_rank_cd's cost grows faster
-- than its terms (500 of a tenant's frequent words ranked over 400 chunks 2 s, 520 of them 9-17 s; a
-- 4,000-character question can hold 2,000), so a query of more than 256 is first reduced to its distinct items
-- (an OR of one item twice ranks and matches as the item once; within an item, so does an AND of one term twice)
-- and refused with 54000 if it still has more. A query of up to 256 terms is the one it always was.
CREATE OR REPLACE FUNCTION rag._fts_query(p_config regconfig, p_text text)
RETURNS tsquery
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    q tsquery := pg_catalog.websearch_to_tsquery(p_config, p_text);
    qt text;
    reduced text;
    n_terms bigint;
BEGIN
    IF q IS NULL THEN
        RETURN NULL;
    END IF;
    qt := CASE WHEN q::text LIKE '%!%' THEN q::text ELSE pg_catalog.replace(q::text, ' & ', ' | ') END;
    IF pg_catalog.numnode(q) <= 511 THEN
        RETURN qt::tsquery;
    END IF;
    -- the query's text as tokens (quoted lexemes with their weights and negation, and operators); the reduction
    -- applies only when they are the whole text (no parentheses: a dictionary that gives several lexemes for
    -- one word); an item is what lies between two top-level |, a conjunct what lies between two & in it
    WITH tok AS (
        SELECT m.t[1] AS t, m.o
        FROM pg_catalog.regexp_matches(qt, '(!?''(?:[^'']|'''')*''(?::[A-D*]+)?|\||&|<->|<[0-9]+>)', 'g')
            WITH ORDINALITY AS m (t, o)
    ),
    placed AS (
        SELECT tok.t, tok.o,
            pg_catalog.count(*) FILTER (WHERE tok.t = '|') OVER (ORDER BY tok.o) AS item,
            pg_catalog.count(*) FILTER (WHERE tok.t IN ('|', '&')) OVER (ORDER BY tok.o) AS conj
        FROM tok
    ),
    conjuncts AS (
        SELECT p.item, p.conj, pg_catalog.string_agg(p.t, ' ' ORDER BY p.o) AS txt, min(p.o) AS o,
            pg_catalog.count(*) FILTER (WHERE p.t LIKE '%''%') AS terms
        FROM placed AS p WHERE p.t NOT IN ('|', '&') GROUP BY p.item, p.conj
    ),
    items AS (
        SELECT d.item, pg_catalog.string_agg(d.txt, ' & ' ORDER BY d.o) AS txt, min(d.o) AS o, sum(d.terms) AS terms
        FROM (SELECT DISTINCT ON (c.item, c.txt) c.* FROM conjuncts AS c ORDER BY c.item, c.txt, c.o) AS d
        GROUP BY d.item
    )
    SELECT pg_catalog.string_agg(u.txt, ' | ' ORDER BY u.o), sum(u.terms)
    INTO reduced, n_terms
    FROM (SELECT DISTINCT ON (i.txt) i.* FROM items AS i ORDER BY i.txt, i.o) AS u
    WHERE (SELECT pg_catalog.string_agg(tok.t, ' ' ORDER BY tok.o) FROM tok) = qt;
    IF reduced IS NULL THEN
        n_terms := (pg_catalog.numnode(q) + 1) / 2;
    END IF;
    IF n_terms > 256 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format(
                'question has %s search terms (a repeated one counted once), over the limit of 256', n_terms),
            HINT = 'Ask a shorter question: retrieval works on the gist, not on whole documents.';
    END IF;
    RETURN reduced::tsquery;
END
$fn$;
COMMENT ON FUNCTION rag._fts_query(regconfig, text) IS
'Internal: websearch_to_tsquery with its AND turned into OR, unless the query negates a term; a query of more '
'than 256 terms is reduced to its distinct items, and 54000 if that still has more than 256.';

-- What every entry point does first: check k and the question's length, check the tenant (42704/42501),
-- correct the question's spelling and embed it once. has_question is false for an empty question.
-- With pgcite_python (ONNX model) the question is embedded in the background: its embedding begins on the
-- backend's worker thread before the spelling correction (again after it, in the rare case a word was
-- corrected) and qemb is NULL: the first statement that reads the vector (rag._candidates' vector leg, after
-- the full-text and title legs) ends it through rag._query_embedding (docs/BENCHMARKS.md, session 18).
CREATE OR REPLACE FUNCTION rag._prepare_question(
    question text, tenant text, k integer, query_embedding public.vector, params jsonb,
    OUT has_question boolean, OUT corrected text, OUT qemb public.vector
)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    begun boolean := false;
    embedded text;
BEGIN
    has_question := rag._check_question(question, k);
    PERFORM rag._require_tenant(tenant);
    IF has_question THEN
        IF query_embedding IS NULL AND pg_catalog.to_regprocedure('rag._embed_begin(text)') IS NOT NULL THEN
            EXECUTE 'SELECT rag._embed_begin($1)' INTO begun USING question;
        END IF;
        corrected := rag._correct_question(tenant, question, params);
        IF begun THEN
            embedded := rag._embedding_text(question, corrected);
            IF embedded IS DISTINCT FROM question THEN
                EXECUTE 'SELECT rag._embed_begin($1)' INTO begun USING embedded;
            END IF;
        END IF;
        IF NOT coalesce(begun, false) THEN
            qemb := rag._query_embedding(question, corrected, query_embedding);
        END IF;
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._prepare_question(text, text, integer, public.vector, jsonb) IS
'Internal: validates k, question and tenant, then corrects and embeds the question once (qemb NULL: its '
'embedding was begun in the background, rag._query_embedding ends it).';

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
CREATE OR REPLACE FUNCTION rag._any_lexeme(p_lexemes text[])
RETURNS tsquery
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.string_agg(pg_catalog.array_to_tsvector(ARRAY[l.lexeme])::text, ' | ' ORDER BY l.lexeme)::tsquery
    FROM pg_catalog.unnest(p_lexemes) AS l (lexeme)
    WHERE l.lexeme IS NOT NULL
$fn$;
COMMENT ON FUNCTION rag._any_lexeme(text[]) IS
'Internal: the tsquery lexeme1 | lexeme2 | ... of normalised lexemes (NULL for an empty array).';

-- The question as the title leg reads it: its first 500 characters, cut before the word the 500th falls in (the
-- question as rag._correct_question returns it: words joined by single spaces). word_similarity's cost grows
-- with the question's length for each title it scores: at 1M chunks a 3,990-character question cost the title
-- leg 1.0-1.1 s of the 350,000-chunk tenant's 2,426 titles (every one shared a lexeme with it), against 2-9 ms
-- for questions of up to 250 characters; at 500 characters at most about an eighth of that. No question of the
-- dev set or the benchmark (at most 250 characters) is cut (issue #10, session 16).
CREATE OR REPLACE FUNCTION rag._title_question(p_corrected text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE
        WHEN pg_catalog.length(p_corrected) <= 500 THEN p_corrected
        -- the last space of the first 501 characters ends the last whole word; none: the first 500
        WHEN pg_catalog.strpos(pg_catalog.left(p_corrected, 501), ' ') = 0 THEN pg_catalog.left(p_corrected, 500)
        ELSE pg_catalog.rtrim(pg_catalog.left(p_corrected,
            501 - pg_catalog.strpos(pg_catalog.reverse(pg_catalog.left(p_corrected, 501)), ' ')))
    END
$fn$;
COMMENT ON FUNCTION rag._title_question(text) IS
'Internal: what the title leg compares titles with: the corrected question, cut to its whole words within the '
'first 500 characters.';

-- How the vector leg searches a tenant's HNSW graph (its own partial index or the table's), measured at 1M
-- chunks (docs/BENCHMARKS.md, 0.5.0 and 0.9.0): hnsw.ef_search 800 for a tenant of over 100,000 live chunks,
-- 400 below (at least 10 x depth, at most pgvector's 1,000); through an own index built with ef_construction 200
-- 600 above 100,000 and 200 below (at least 5 x depth); and the rows the ANN query fetches: ef / 2, or
-- 1.5 x ef for the larger tenants through their own partial index (the iterative scan searches on past the first
-- ef candidates; measured only there: through the table's index with a tenant filter it would visit about
-- three times as many rows of other tenants, up to max_scan_tuples).
CREATE OR REPLACE FUNCTION rag._ann_ef(p_live bigint, p_depth integer, p_dense boolean)
RETURNS integer
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- PL/pgSQL like the other helpers of a call: a sql function with SET is planned again on every call.
    -- A graph built with ef_construction 200 (rag._hnsw_build_options) reaches the same clusters with
    -- three quarters of the search (docs/BENCHMARKS.md, 0.9.0 session 12: recall@10 0.998 at ef 600 / 900 rows
    -- against 0.990 at ef 800 / 1,200 rows on the default graph, in the same time).
    -- Up to 100,000 chunks the dense graph needs half the search: at 1M chunks, the 1 % tenants (10,000
    -- chunks) reached recall@10 1.000 at ef_search 150 to 400 on it, against 0.999 (one question 0.9) below
    -- 400 on the default graph (0.9.0 session 14), so it is searched with ef 200 (5 x depth) and ef / 2 rows.
    IF p_live <= 100000 AND p_dense THEN
        RETURN least(1000, greatest(p_depth * 5, 200));
    END IF;
    RETURN least(1000, greatest(p_depth * 10,
        CASE WHEN p_live > 100000 THEN CASE WHEN p_dense THEN 600 ELSE 800 END ELSE 400 END));
END
$fn$;
COMMENT ON FUNCTION rag._ann_ef(bigint, integer, boolean) IS
'Internal: hnsw.ef_search of the vector leg for a tenant of p_live live chunks at depth p_depth (p_dense: '
'searched through its own index built with ef_construction >= 200).';

CREATE OR REPLACE FUNCTION rag._ann_rows(p_live bigint, p_ef integer, p_own_index boolean)
RETURNS integer
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN CASE WHEN p_live > 100000 AND p_own_index THEN 3 ELSE 1 END * p_ef / 2;
END
$fn$;
COMMENT ON FUNCTION rag._ann_rows(bigint, integer, boolean) IS
'Internal: how many rows the vector leg''s ANN query fetches (LIMIT) at hnsw.ef_search p_ef for a tenant of '
'p_live live chunks: ef / 2, or 1.5 x ef through the own index of a tenant of over 100,000 chunks (pgvector''s '
'iterative scan searches on).';

CREATE OR REPLACE FUNCTION rag._ann_fetch(p_live bigint, p_depth integer, p_own_index boolean, p_dense boolean)
RETURNS integer
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN rag._ann_rows(p_live, rag._ann_ef(p_live, p_depth, p_own_index AND p_dense), p_own_index);
END
$fn$;
COMMENT ON FUNCTION rag._ann_fetch(bigint, integer, boolean, boolean) IS
'Internal: how many rows the vector leg''s ANN query fetches (LIMIT) for a tenant of p_live live chunks at depth '
'p_depth under the size rule (rag._ann_ef, rag._ann_rows).';

-- The ef_search measured on a tenant's own graph (rag._tune_ann, rag.tenant_ann) while that graph is the one
-- measured: same index name, same relfilenode (REINDEX, VACUUM FULL or DROP and CREATE give a new one). NULL
-- otherwise: the size rule of rag._ann_ef applies.
CREATE OR REPLACE FUNCTION rag._tuned_ef(p_tenant text, p_index text)
RETURNS integer
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_tenant text COLLATE "default" := p_tenant;
    ef integer;
BEGIN
    SELECT a.ef_search INTO ef
    FROM rag.tenant_ann AS a
    INNER JOIN pg_catalog.pg_class AS cl
        ON cl.oid = pg_catalog.to_regclass('rag.' || pg_catalog.quote_ident(p_index)) AND cl.relfilenode = a.index_node
    WHERE a.tenant = v_tenant AND a.index_name = p_index COLLATE "default";
    RETURN ef;
END
$fn$;
COMMENT ON FUNCTION rag._tuned_ef(text, text) IS
'Internal: the hnsw.ef_search rag._tune_ann measured for the tenant''s own HNSW index p_index, while it is the '
'graph measured; NULL when it was not measured or was rebuilt since.';

-- The vector leg's ef_search: the measured one when there is one (never under 5 x depth: a deeper leg needs a
-- longer search whatever the graph), else the size rule.
CREATE OR REPLACE FUNCTION rag._ann_search(p_live bigint, p_depth integer, p_dense boolean, p_tuned integer)
RETURNS integer
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_tuned IS NOT NULL THEN
        RETURN least(1000, greatest(p_tuned, p_depth * 5));
    END IF;
    RETURN rag._ann_ef(p_live, p_depth, p_dense);
END
$fn$;
COMMENT ON FUNCTION rag._ann_search(bigint, integer, boolean, integer) IS
'Internal: hnsw.ef_search of the vector leg at depth p_depth: p_tuned (rag._tuned_ef) when measured, at least '
'5 x depth and at most 1,000; else rag._ann_ef''s size rule.';

-- Whether an HNSW index was built with ef_construction of at least 200 (rag._hnsw_build_options): its graph is
-- searched with a smaller ef_search (rag._ann_ef). An index built with pgvector's default (64) keeps the
-- search it was measured with, so an upgrade without a rebuild keeps its recall.
CREATE OR REPLACE FUNCTION rag._index_is_dense(p_index regclass)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN EXISTS (
        SELECT FROM pg_catalog.pg_class AS cl
        CROSS JOIN LATERAL pg_catalog.pg_options_to_table(cl.reloptions) AS o
        WHERE cl.oid = p_index AND o.option_name = 'ef_construction' AND o.option_value::integer >= 200
    );
END
$fn$;
COMMENT ON FUNCTION rag._index_is_dense(regclass) IS
'Internal: true when the HNSW index p_index was built with ef_construction >= 200 (searched with a smaller '
'ef_search by rag._ann_ef).';

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
--   rows, by primary key).
-- - titles: the tenant's distinct titles (rag.tenant_title) sharing a lexeme with the question (the tenant's own
--   partial GIN index, else the table-wide one; a tenant of at most 2,000 chunks reads its titles by primary
--   key), each scored once by word_similarity.
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
-- So the body chooses per statement (generic only where no tenant's plan differs) and the caller's own
-- setting never applies.
SET plan_cache_mode = force_custom_plan
-- Every leg is bounded by an index (a few hundred rows): starting parallel workers costs more (15-20 ms each
-- Gather on the 2-core benchmark machine) than the scans, and JIT compiling (35 ms) more than running.
SET max_parallel_workers_per_gather = 0
SET jit = off
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
    -- the best titles of the title leg, with their scores
    title_names text [] COLLATE "default";
    title_s float8 [];
    -- each leg's chunks in rank order, with their scores
    vec_ids bigint [];
    vec_d float8 [];
    fts_top bigint [];
    fts_s float8 [];
    trgm_ids bigint [];
    trgm_s float8 [];
    prev_mode text;
BEGIN
    -- Each leg is its own statement, each leaving its chunks in arrays in rank order (docs/BENCHMARKS.md,
    -- 0.8.0: planning one statement of all three legs cost more than running it for small tenants). Those
    -- whose best plan is the same for every tenant (primary-key lookups, a tenant's rows through the tenant
    -- index, the arrays) are planned once per connection (generic); the two that choose an index by the tenant
    -- (full-text candidates, titles: a tenant's own partial index, or how big its share is) are planned for
    -- each call, as are EXECUTE's statements (the ANN query, the own full-text index), which name the tenant.
    prev_mode := pg_catalog.current_setting('plan_cache_mode');
    PERFORM pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
    -- full text: which lexemes choose the candidates (a negated query keeps its own AND semantics)
    IF q IS NOT NULL AND pg_catalog.strpos(q::text, '!') = 0 THEN
        SELECT pg_catalog.array_agg(y.lexeme ORDER BY y.lexeme) FILTER (WHERE y.run <= fts_budget),
            pg_catalog.count(*) FILTER (WHERE y.run > fts_budget),
            (pg_catalog.array_agg(y.lexeme ORDER BY y.df, y.lexeme))[1],
            (pg_catalog.array_agg(y.lexeme ORDER BY y.df, y.lexeme))[2],
            coalesce(max(y.run) FILTER (WHERE y.run <= fts_budget), min(y.df))
        INTO kept, n_dropped, rarest, second, kept_df
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
        END IF;
        -- The GIN index holds every tenant's chunks: its bitmap for the chosen lexemes costs about their
        -- matches in the whole table (~0.15 us each), about kept_df / share. A small tenant's own rows
        -- filtered by @@ (its tenant index, ~4 us a row with the tsvector read) cost less when
        -- n^2 * 27 < kept_df * table: the second branch of fts_match (OFFSET 0 keeps @@ out of the scan).
        SELECT sum(s.live_chunks) INTO n_table FROM rag.tenant_stat AS s;
        scan_tenant := n_active::float8 * n_active * 27
            < greatest(coalesce(kept_df, 0), 1)::float8 * coalesce(n_table, 0);
        big_share := n_active * 10 >= coalesce(n_table, 0);
    END IF;
    -- full-text leg: the candidates (found through GIN, fetched without reading their tsv), the newest
    -- fts_budget of them ranked (a NULL query matches nothing)
    IF q IS NOT NULL AND q_match IS NOT NULL THEN
        PERFORM pg_catalog.set_config('plan_cache_mode', 'force_custom_plan', true);
        IF own_fts THEN
            -- the tenant's own partial GIN index (rag._index_tenants): its bitmap holds only the tenant's
            -- matches. The tenant is a literal, so the planner proves the index's predicate.
            EXECUTE pg_catalog.format(
                'WITH m AS MATERIALIZED ('
                ' SELECT c.chunk_id FROM rag.chunk AS c WHERE c.tenant = %L AND c.retired_at IS NULL'
                ' AND c.tsv OPERATOR(pg_catalog.@@) $1)'
                ' SELECT pg_catalog.array_agg(x.chunk_id) FROM'
                ' (SELECT m.chunk_id FROM m ORDER BY m.chunk_id DESC LIMIT $2) AS x', p_tenant)
            INTO fts_ids USING q_match, fts_budget;
        ELSIF scan_tenant THEN
            -- a small tenant's own rows filtered by @@ (OFFSET 0 keeps @@ out of the scan)
            WITH m AS MATERIALIZED (
                SELECT s.chunk_id FROM (
                    SELECT c.chunk_id, c.tsv FROM rag.chunk AS c
                    WHERE c.tenant = v_tenant AND c.retired_at IS NULL
                    OFFSET 0
                ) AS s
                WHERE s.tsv @@ q_match
            )
            SELECT pg_catalog.array_agg(x.chunk_id) INTO fts_ids
            FROM (SELECT m.chunk_id FROM m ORDER BY m.chunk_id DESC LIMIT fts_budget) AS x;
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
            SELECT u.chunk_id, ct.s
            FROM pg_catalog.unnest(fts_ids) AS u (chunk_id)
            CROSS JOIN LATERAL (
                SELECT v.tsv FROM rag.chunk_tsv AS v
                WHERE v.chunk_id = u.chunk_id AND v.tsv @@ q
                OFFSET 0
            ) AS m
            CROSS JOIN LATERAL (
                SELECT round(sum(w.idf * 2.2 * e.tf / (e.tf + 1.2))::numeric, 6)::float8 AS s
                FROM (
                    SELECT tv.lexeme, coalesce(pg_catalog.array_length(tv.positions, 1), 1)::float8 AS tf
                    -- only the question's lexemes: every position weighed D, the question's A, the A ones kept
                    -- (C functions on the tsvector: 1.1 instead of 6.9 ms for 400 candidates of ~46 lexemes;
                    -- every lexeme of a tsvector the server made has a position)
                    FROM pg_catalog.unnest(pg_catalog.ts_filter(
                        pg_catalog.setweight(pg_catalog.setweight(m.tsv, 'D'), 'A', q_lex), '{a}'
                    )) AS tv
                ) AS e
                INNER JOIN ROWS FROM (pg_catalog.unnest(q_lex), pg_catalog.unnest(q_idf)) AS w (lexeme, idf)
                    ON w.lexeme = e.lexeme
            ) AS ct
            WHERE ct.s IS NOT NULL
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
        PERFORM pg_catalog.set_config('plan_cache_mode', 'force_custom_plan', true);
        WITH scored AS (
            SELECT x.title, x.live_chunks,
                round(public.word_similarity(x.stripped, title_q)::numeric, 6)::float8 AS s
            FROM rag.tenant_title AS x
            WHERE NOT scan_titles AND x.tenant = v_tenant AND x.live_chunks > 0 AND x.tsv @@ q_title
            UNION ALL
            SELECT y.title, y.live_chunks,
                round(public.word_similarity(y.stripped, title_q)::numeric, 6)::float8 AS s
            FROM (
                SELECT x.title, x.live_chunks, x.stripped, x.tsv FROM rag.tenant_title AS x
                WHERE scan_titles AND x.tenant = v_tenant AND x.live_chunks > 0
                OFFSET 0
            ) AS y
            WHERE y.tsv @@ q_title
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
        PERFORM pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
        -- their chunks, through the tenant's (tenant, title) index
        SELECT pg_catalog.array_agg(g.chunk_id ORDER BY g.s DESC, g.doc_key, g.chunk_index, g.chunk_id),
            pg_catalog.array_agg(g.s ORDER BY g.s DESC, g.doc_key, g.chunk_index, g.chunk_id)
        INTO trgm_ids, trgm_s
        FROM (
            SELECT c.chunk_id, c.doc_key, c.chunk_index, ti.s
            FROM ROWS FROM (pg_catalog.unnest(title_names), pg_catalog.unnest(title_s)) AS ti (title, s)
            CROSS JOIN LATERAL (
                SELECT k.chunk_id, k.doc_key, k.chunk_index FROM rag.chunk AS k
                WHERE k.tenant = v_tenant AND k.retired_at IS NULL AND k.title = ti.title
                OFFSET 0
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
    PERFORM pg_catalog.set_config('plan_cache_mode', prev_mode, true);
END
$fn$;
COMMENT ON FUNCTION rag._candidates(text, text, public.vector, integer, jsonb, text) IS
'Internal: candidates of the vector, full-text and title-trigram legs (p_depth each, each read through an '
'index) for a spell-corrected question, fused by weighted reciprocal rank fusion, in total order. p_params: '
'rag._params() (rrf_k, weight_*, exact_search_limit, ...).';

-- The search depth of a tenant's own HNSW graph, measured on it (0.9.0, session 15). Two builds of the same
-- 350,000-chunk tenant at 1M chunks needed different searches for recall@10 >= 0.99 (one 200, the other over
-- 400: HNSW graphs are random), so a rule by size alone must assume the worse graph and searches the better one
-- three times too long. For up to p_probes probe questions (the longest sentence of a deterministic sample of
-- the tenant's live chunks: a sentence is text of a question's length embedded by the tenant's model; the
-- chunk's own vector when it has no sentences) this compares the vector leg's ANN query through the tenant's
-- own index, as rag._candidates runs it (the same pgvector settings, rows rag._ann_rows), with exact search of
-- the tenant's live chunks, at each ef_search of the ladder; recall@10 counts the ANN's 10 nearest whose exact
-- distance is at most the exact 10th (ties count). The smallest ef_search whose mean reaches p_target is kept in
-- rag.tenant_ann with the index's relfilenode; none: the largest, with a warning. A DBA's operation (superuser
-- or pgcite_owner): exact search reads the tenant's chunks once per probe (seconds per probe at 350,000 chunks).
CREATE OR REPLACE FUNCTION rag._tune_ann(
    p_tenant text DEFAULT NULL, p_probes integer DEFAULT 100, p_target float8 DEFAULT 0.995
)
RETURNS TABLE (
    tenant text, index_name text, live_chunks bigint, ef_search integer, recall float8, min_recall float8,
    probes integer, tune_s float8
)
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
SET max_parallel_workers_per_gather = 0
SET jit = off
SET "hnsw.ef_search" = 40
SET "hnsw.iterative_scan" = relaxed_order
SET "hnsw.max_scan_tuples" = 20000
SET "hnsw.scan_mem_multiplier" = 1
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    s record;
    t0 timestamptz;
    ladder integer [] := ARRAY[200, 300, 400, 600, 800, 1000];
    vecs public.vector [];
    probe public.vector;
    d10 float8;
    n_exact integer;
    ann_d float8 [];
    sums float8 [];
    mins float8 [];
    r float8;
    n integer;
    chosen integer;
    chosen_i integer;
    curve jsonb;
    node oid;
BEGIN
    IF p_probes IS NULL OR p_probes NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('p_probes must be between 1 and 1000, not %s', coalesce(p_probes::text, 'NULL'));
    END IF;
    IF p_target IS NULL OR NOT (p_target > 0 AND p_target <= 1) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('p_target must be in (0, 1], not %s', coalesce(p_target::text, 'NULL'));
    END IF;
    FOR s IN
        SELECT st.tenant, st.live_chunks, rag._tenant_index_name(st.tenant) AS name
        FROM rag.tenant_stat AS st
        WHERE (p_tenant IS NULL OR st.tenant = p_tenant COLLATE "default") AND st.live_chunks > 0
            AND pg_catalog.to_regclass('rag.' || rag._tenant_index_name(st.tenant)) IS NOT NULL
        ORDER BY st.live_chunks DESC, st.tenant
    LOOP
        t0 := pg_catalog.clock_timestamp();
        SELECT pg_catalog.array_agg(coalesce(x.embedding, p.embedding) ORDER BY p.h, p.chunk_id) INTO vecs
        FROM (
            SELECT c.chunk_id, c.embedding, pg_catalog.md5(c.chunk_id::text) AS h
            FROM rag.chunk AS c
            WHERE c.tenant = s.tenant AND c.retired_at IS NULL
            ORDER BY h, c.chunk_id
            LIMIT p_probes
        ) AS p
        LEFT JOIN LATERAL (
            SELECT se.embedding FROM rag.sentence AS se WHERE se.chunk_id = p.chunk_id
            ORDER BY se.end_pos - se.start_pos DESC, se.ord LIMIT 1
        ) AS x ON true;
        n := coalesce(pg_catalog.cardinality(vecs), 0);
        CONTINUE WHEN n = 0;
        sums := pg_catalog.array_fill(0::float8, ARRAY[pg_catalog.cardinality(ladder)]);
        mins := pg_catalog.array_fill(1::float8, ARRAY[pg_catalog.cardinality(ladder)]);
        FOREACH probe IN ARRAY vecs LOOP
            -- exact: the distances computed below OFFSET 0, so no plan reads them in an HNSW index's order
            SELECT max(e.d), pg_catalog.count(*) INTO d10, n_exact
            FROM (
                SELECT x.d FROM (
                    SELECT c.embedding OPERATOR(public.<=>) probe AS d
                    FROM rag.chunk AS c
                    WHERE c.tenant = s.tenant AND c.retired_at IS NULL
                    OFFSET 0
                ) AS x
                ORDER BY x.d
                LIMIT 10
            ) AS e;
            FOR i IN 1 .. pg_catalog.cardinality(ladder) LOOP
                PERFORM pg_catalog.set_config('hnsw.ef_search', ladder[i]::text, true);
                EXECUTE pg_catalog.format(
                    'SELECT pg_catalog.array_agg(a.raw ORDER BY a.raw) FROM ('
                    ' SELECT c.embedding OPERATOR(public.<=>) $1 AS raw'
                    ' FROM rag.chunk AS c WHERE c.tenant = %L AND c.retired_at IS NULL'
                    ' ORDER BY c.embedding OPERATOR(public.<=>) $1 LIMIT $2) AS a', s.tenant)
                INTO ann_d USING probe, rag._ann_rows(s.live_chunks, ladder[i], true);
                SELECT pg_catalog.count(*) FILTER (WHERE a.d <= d10)::float8 / n_exact INTO r
                FROM pg_catalog.unnest(ann_d[1:10]) AS a (d);
                sums[i] := sums[i] + r;
                mins[i] := least(mins[i], r);
            END LOOP;
        END LOOP;
        PERFORM pg_catalog.set_config('hnsw.ef_search', '40', true);
        chosen_i := NULL;
        FOR i IN 1 .. pg_catalog.cardinality(ladder) LOOP
            IF sums[i] / n >= p_target THEN
                chosen_i := i;
                EXIT;
            END IF;
        END LOOP;
        IF chosen_i IS NULL THEN
            chosen_i := pg_catalog.cardinality(ladder);
            RAISE WARNING USING
                MESSAGE = pg_catalog.format('tenant %s: recall@10 %s at ef_search %s, under the target %s',
                    s.tenant, round((sums[chosen_i] / n)::numeric, 4), ladder[chosen_i], p_target),
                HINT = 'Rebuild the tenant''s index (DROP INDEX, then rag._index_tenants) for another graph.';
        END IF;
        chosen := ladder[chosen_i];
        SELECT pg_catalog.jsonb_object_agg(l.ef::text, round((sums[l.i] / n)::numeric, 4)) INTO curve
        FROM pg_catalog.unnest(ladder) WITH ORDINALITY AS l (ef, i);
        SELECT cl.relfilenode INTO node FROM pg_catalog.pg_class AS cl
        WHERE cl.oid = pg_catalog.to_regclass('rag.' || s.name);
        INSERT INTO rag.tenant_ann AS a (tenant, index_name, index_node, live_chunks, ef_search, recall,
            min_recall, probes, target, curve, tuned_at)
        VALUES (s.tenant, s.name, node, s.live_chunks, chosen, sums[chosen_i] / n, mins[chosen_i], n, p_target, curve,
            pg_catalog.clock_timestamp())
        ON CONFLICT ON CONSTRAINT tenant_ann_pkey DO UPDATE SET
            index_name = excluded.index_name, index_node = excluded.index_node, live_chunks = excluded.live_chunks,
            ef_search = excluded.ef_search, recall = excluded.recall, min_recall = excluded.min_recall,
            probes = excluded.probes, target = excluded.target, curve = excluded.curve, tuned_at = excluded.tuned_at;
        tenant := s.tenant;
        index_name := s.name;
        live_chunks := s.live_chunks;
        ef_search := chosen;
        recall := round((sums[chosen_i] / n)::numeric, 4)::float8;
        min_recall := round(mins[chosen_i]::numeric, 4)::float8;
        probes := n;
        tune_s := round(extract(EPOCH FROM pg_catalog.clock_timestamp() - t0)::numeric, 1)::float8;
        RETURN NEXT;
    END LOOP;
END
$fn$;
COMMENT ON FUNCTION rag._tune_ann(text, integer, float8) IS
'Internal (a DBA''s operation): for every tenant (or only p_tenant) with its own HNSW index, measures the vector '
'leg''s recall@10 against exact search for up to p_probes probe questions (its sentences) at each ef_search of '
'200-1,000 and keeps the smallest reaching p_target in rag.tenant_ann, which the vector leg then uses.';

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
