-- Store, the inputs: what a writer hands in is checked here, and what it already stored is reused
-- (embeddings and sentences of chunk texts the tenant has), so an ingest embeds only new text.

-- Stored embeddings of texts (by rag._embed_text hash) this tenant already embedded with this model, so an
-- ingest embeds only new text. SECURITY DEFINER: tenant roles cannot read embeddings directly.
CREATE OR REPLACE FUNCTION rag._reused_embeddings(p_caller name, p_tenant text, p_model text, p_hashes bytea[])
RETURNS TABLE (content_hash bytea, embedding public.vector)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'write');
    RETURN QUERY
    SELECT DISTINCT ON (c.content_hash) c.content_hash, c.embedding
    FROM rag.chunk AS c
    WHERE c.tenant = p_tenant AND c.model = p_model AND c.content_hash = ANY (p_hashes)
    ORDER BY c.content_hash, c.chunk_id;
END
$fn$;
COMMENT ON FUNCTION rag._reused_embeddings(name, text, text, bytea[]) IS
'Internal (SECURITY DEFINER: reads embeddings): the stored embeddings of the given text hashes in a tenant.';

-- The stored sentences (offsets and embeddings) of chunks with the given text hashes in a tenant: an ingest
-- copies them for chunk texts it already has. SECURITY DEFINER: tenant roles cannot read rag.sentence.
CREATE OR REPLACE FUNCTION rag._reused_sentences(p_caller name, p_tenant text, p_model text, p_hashes bytea[])
RETURNS TABLE (content_hash bytea, start_pos integer, end_pos integer, embedding public.vector)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'write');
    RETURN QUERY
    SELECT src.content_hash, s.start_pos, s.end_pos, s.embedding
    FROM (
        SELECT DISTINCT ON (c.content_hash) c.content_hash, c.chunk_id
        FROM rag.chunk AS c
        WHERE c.tenant = p_tenant AND c.model = p_model AND c.content_hash = ANY (p_hashes)
            AND EXISTS (SELECT FROM rag.sentence AS x WHERE x.chunk_id = c.chunk_id)
        ORDER BY c.content_hash, c.chunk_id
    ) AS src
    INNER JOIN rag.sentence AS s ON s.chunk_id = src.chunk_id;
END
$fn$;
COMMENT ON FUNCTION rag._reused_sentences(name, text, text, bytea[]) IS
'Internal (SECURITY DEFINER: reads rag.sentence): the stored sentences of chunks with the given text hashes.';

-- The same, with the length of the stored chunk's content: the text hash is of title, blank line and content,
-- so a chunk titled "Alpha" with content "B" and an untitled one with content "Alpha<blank line>B" share it (and
-- their embedding) but not their sentence offsets. Copying by hash alone made rag.ingest of the second fail
-- (22023: a sentence out of its chunk) or store spans shifted by the title. Callers join on hash and length
-- (two different splits of one text have different content lengths).
CREATE OR REPLACE FUNCTION rag._reused_spans(p_caller name, p_tenant text, p_model text, p_hashes bytea[])
RETURNS TABLE (
    content_hash bytea, content_length integer, start_pos integer, end_pos integer, embedding public.vector
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'write');
    RETURN QUERY
    SELECT src.content_hash, src.content_length, s.start_pos, s.end_pos, s.embedding
    FROM (
        SELECT DISTINCT ON (c.content_hash, pg_catalog.length(c.content)) c.content_hash,
            pg_catalog.length(c.content) AS content_length, c.chunk_id
        FROM rag.chunk AS c
        WHERE c.tenant = p_tenant AND c.model = p_model AND c.content_hash = ANY (p_hashes)
            AND EXISTS (SELECT FROM rag.sentence AS x WHERE x.chunk_id = c.chunk_id)
        ORDER BY c.content_hash, pg_catalog.length(c.content), c.chunk_id
    ) AS src
    INNER JOIN rag.sentence AS s ON s.chunk_id = src.chunk_id;
END
$fn$;
COMMENT ON FUNCTION rag._reused_spans(name, text, text, bytea[]) IS
'Internal (SECURITY DEFINER: reads rag.sentence): the stored sentences of chunks with the given text hashes, '
'with the length of their content (a copy must match both).';

-- A vector pgvector can measure: its cosine distance to itself is a number. NaN for all zeros, and for
-- components whose single-precision squares vanish (1e-40) or overflow (1e30) although the norm (computed in
-- double precision) is not zero. Such a vector's distance to anything is NaN. PL/pgSQL: as LANGUAGE sql with SET
-- search_path it was planned again on every call (each question's embedding is checked; issue #10, session 20).
CREATE OR REPLACE FUNCTION rag._has_direction(p_vector public.vector)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (p_vector OPERATOR(public.<=>) p_vector) <> 'NaN'::float8;
END
$fn$;
COMMENT ON FUNCTION rag._has_direction(public.vector) IS
'Internal: true when pgvector can measure the vector (its cosine distance to itself is not NaN).';

-- The chunks a caller hands in must be complete and embedded: content, a 384-dimension embedding with a
-- direction. pgvector sums squares in single precision, so not only all zeros but components whose squares
-- vanish (1e-40) or overflow (1e30) give a cosine distance of NaN, which sorts after every chunk: a vector
-- whose distance to itself is NaN is refused (rag._has_direction).
CREATE OR REPLACE FUNCTION rag._check_chunks(p_chunks rag.chunk_input[])
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    bad integer;
BEGIN
    SELECT min(c.o) INTO bad
    FROM pg_catalog.unnest(p_chunks) WITH ORDINALITY AS c (anchor, section_path, title, content, token_count,
        embedding, o)
    WHERE c.embedding IS NULL OR coalesce(pg_catalog.btrim(c.content), '') = ''
        OR public.vector_dims(c.embedding) <> 384 OR NOT rag._has_direction(c.embedding);
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('chunk %s needs non-empty content and a non-zero embedding of 384 numbers',
                bad),
            HINT = 'Components must be finite, and the vector''s cosine distance to itself a number (not all '
                'zeros, none so large or small that its square overflows or vanishes in single precision).';
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._check_chunks(rag.chunk_input[]) IS
'Internal: 22023 unless every chunk has content and a 384-dimension embedding with a direction '
'(rag._has_direction).';

-- Sentences handed in must lie inside their chunk's content, without overlapping, with non-zero embeddings.
CREATE OR REPLACE FUNCTION rag._check_sentences(p_chunks rag.chunk_input[], p_sentences rag.sentence_input[])
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    bad integer;
BEGIN
    SELECT min(x.chunk_ord) INTO bad
    FROM (
        SELECT s.chunk_ord, s.start_pos, s.end_pos, s.embedding,
            pg_catalog.lag(s.end_pos) OVER (PARTITION BY s.chunk_ord ORDER BY s.start_pos) AS prev_end
        FROM pg_catalog.unnest(p_sentences) AS s
    ) AS x
    WHERE x.chunk_ord IS NULL OR x.chunk_ord NOT BETWEEN 1 AND coalesce(pg_catalog.cardinality(p_chunks), 0)
        OR x.start_pos IS NULL OR x.end_pos IS NULL OR x.start_pos < 0 OR x.end_pos <= x.start_pos
        OR x.end_pos > pg_catalog.length((p_chunks[x.chunk_ord]).content) OR x.start_pos < x.prev_end
        OR x.embedding IS NULL OR NOT rag._has_direction(x.embedding);
    IF bad IS NOT NULL OR EXISTS (
        SELECT FROM pg_catalog.unnest(p_sentences) AS s WHERE s.chunk_ord IS NULL OR s.embedding IS NULL) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('a sentence of chunk %s is out of its chunk, overlaps another or has no '
                'non-zero embedding', coalesce(bad::text, '?')),
            HINT = 'Sentences: {"start": 0-based offset, "end": exclusive offset, "embedding": [384 numbers]}.';
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._check_sentences(rag.chunk_input[], rag.sentence_input[]) IS
'Internal: 22023 unless every sentence lies in its chunk''s content, in order, with a non-zero embedding.';

-- Chunks and sentences of a JSON array of items (rag.store_document, rag.store_parsed), as the arrays
-- rag._store_version takes: 22023 when an embedding is not a vector of 384 numbers or an offset no integer.
CREATE OR REPLACE FUNCTION rag._item_inputs(
    p_items jsonb, OUT chunks rag.chunk_input[], OUT sentences rag.sentence_input[]
)
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    SELECT pg_catalog.array_agg(ROW(
        e ->> 'anchor', e ->> 'section_path', coalesce(e ->> 'title', ''), e ->> 'content',
        coalesce((e ->> 'token_count')::integer, 0),
        nullif(e -> 'embedding', 'null'::jsonb)::text::public.vector(384)
    )::rag.chunk_input ORDER BY o)
    INTO chunks
    FROM pg_catalog.jsonb_array_elements(p_items) WITH ORDINALITY AS x (e, o);
    SELECT pg_catalog.array_agg(ROW(
        x.o::integer, (s ->> 'start')::integer, (s ->> 'end')::integer,
        (s -> 'embedding')::text::public.vector(384)
    )::rag.sentence_input)
    INTO sentences
    FROM pg_catalog.jsonb_array_elements(p_items) WITH ORDINALITY AS x (e, o),
        pg_catalog.jsonb_array_elements(CASE WHEN pg_catalog.jsonb_typeof(x.e -> 'sentences') = 'array'
            THEN x.e -> 'sentences' ELSE '[]' END) AS s;
EXCEPTION WHEN data_exception THEN
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = 'a chunk''s or sentence''s embedding is not a vector of 384 numbers, or an offset is not an '
            'integer',
        DETAIL = SQLERRM;
END
$fn$;
COMMENT ON FUNCTION rag._item_inputs(jsonb) IS
'Internal: a JSON array of chunk items (with optional sentences) as rag.chunk_input[] and rag.sentence_input[].';
