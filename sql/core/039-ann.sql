-- The vector leg's HNSW search: ef_search and the rows its ANN query fetches for a tenant (by its size, or as
-- measured on its own graph by rag._tune_ann and kept in rag.tenant_ann). rag._candidates (040-retrieve.sql)
-- reads them.

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
