-- Explain: every retrieval candidate of a question with its per-leg ranks and what dropped it.

CREATE OR REPLACE FUNCTION rag._explain(
    p_caller name, p_question text, p_tenant text, p_k integer, p_query_embedding public.vector
)
RETURNS TABLE (
    fused_rank integer, chunk_id bigint, doc_key text, anchor text, title text,
    vec_rank integer, distance float8, fts_rank integer, fts_score float8, trgm_rank integer, trgm_score float8,
    fused_score float8, cited boolean, dropped_by text
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    params jsonb := rag._params();
    p record;
    r record;
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'read');
    p := rag._prepare_question(p_question, p_tenant, p_k, p_query_embedding, params);
    IF NOT p.has_question THEN
        RETURN;
    END IF;
    SELECT * INTO r FROM rag._answer(p_question, p.corrected, p_tenant, p_k, p.qemb, '{}', params);
    RETURN QUERY
    SELECT x.fused_rank, x.chunk_id, x.doc_key, c.anchor, c.title, x.vec_rank, x.distance, x.fts_rank,
        x.fts_score, x.trgm_rank, x.trgm_score, x.fused_score,
        EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(r.citations) AS e
                WHERE (e ->> 'chunk_id')::bigint = x.chunk_id),
        CASE
            WHEN x.fused_rank > p_k THEN 'rank_beyond_k'
            WHEN r.status = 'abstained' THEN 'gate:' || r.reason || coalesce(' ' || (r.evidence -> 'gate' ->> 'failed'), '')
            WHEN EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(r.citations) AS e
                         WHERE (e ->> 'chunk_id')::bigint = x.chunk_id) THEN NULL
            ELSE 'not_quoted'
        END
    FROM rag._candidates(p_tenant, p.corrected, p.qemb, greatest(p_k * 4, 40), params, p_question) AS x
    INNER JOIN rag.chunk AS c ON c.chunk_id = x.chunk_id
    ORDER BY x.fused_rank;
END
$fn$;
COMMENT ON FUNCTION rag._explain(name, text, text, integer, public.vector) IS
'Internal (SECURITY DEFINER: reads embeddings): rag.explain for the checked caller.';

CREATE OR REPLACE FUNCTION rag.explain(
    question text, tenant text, k integer DEFAULT 5, query_embedding public.vector DEFAULT NULL
)
RETURNS TABLE (
    fused_rank integer, chunk_id bigint, doc_key text, anchor text, title text,
    vec_rank integer, distance float8, fts_rank integer, fts_score float8, trgm_rank integer, trgm_score float8,
    fused_score float8, cited boolean, dropped_by text
)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._explain(current_user, explain.question COLLATE "default", explain.tenant, explain.k,
        explain.query_embedding)
$fn$;
COMMENT ON FUNCTION rag.explain(text, text, integer, public.vector) IS
'Every candidate of every retrieval leg with its rank and score per leg, the fused order, whether it was cited '
'and what dropped it (rank_beyond_k, gate:<reason>, not_quoted). query_embedding as for rag.ask (needed '
'where pgcite_python is not installed).';

GRANT EXECUTE ON FUNCTION rag.explain(text, text, integer, public.vector) TO pgcite_reader;
