-- Store, documents parsed, chunked and embedded by the client (`pgcite ingest` without PL/Python, or with
-- --client-side) with the chunker and model rag.ingest uses. A document gets the hash rag.ingest gives the same
-- body, so re-ingesting an unchanged file is 'unchanged' before the client embeds anything, whichever side
-- parsed it first; and the document row is the one rag.ingest writes (detected format, the parser's title,
-- empty sections).

-- The hash of a document as rag.ingest computes it: the body, the requested format (lower case) and the
-- chunker's version, the title, the source URL and the metadata.
CREATE OR REPLACE FUNCTION rag._ingest_hash(
    p_body text, p_format text, p_chunker integer, p_title text, p_source_url text, p_metadata jsonb
)
RETURNS bytea
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._document_hash(p_body, pg_catalog.lower(coalesce(p_format, 'auto')) || ';chunker=' || p_chunker,
        p_title, p_source_url, p_metadata)
$fn$;
COMMENT ON FUNCTION rag._ingest_hash(text, text, integer, text, text, jsonb) IS
'Internal: the hash rag.ingest and rag.store_parsed give a document (body, requested format, chunker version, '
'title, source_url, metadata).';

-- What rag.ingest checks before it parses: the writer, the key and body, the requested format.
CREATE OR REPLACE FUNCTION rag._check_ingest(p_caller name, p_tenant text, p_key text, p_body text, p_format text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'write');
    PERFORM rag._check_document(p_key, p_body);
    IF pg_catalog.lower(coalesce(p_format, 'auto')) NOT IN ('auto', 'html', 'markdown', 'text') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('unknown format "%s"', p_format),
            HINT = 'Use auto, html, markdown or text.';
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._check_ingest(name, text, text, text, text) IS
'Internal: 42501/42704 for the writer and tenant, 22004/22023/54000 for the key and body, 22023 for an unknown '
'format: the checks rag.ingest and rag.store_parsed make before any work.';

CREATE OR REPLACE FUNCTION rag.document_unchanged(
    tenant text, key text, body text, format text, chunker_version integer, title text DEFAULT NULL,
    source_url text DEFAULT NULL, metadata jsonb DEFAULT '{}'
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._check_ingest(current_user, document_unchanged.tenant, document_unchanged.key,
        document_unchanged.body, document_unchanged.format);
    RETURN QUERY SELECT d.doc_key, d.version, 'unchanged'::text, d.chunk_count, d.empty_sections
    FROM rag.document AS d
    WHERE d.tenant = document_unchanged.tenant AND d.doc_key = document_unchanged.key AND d.retired_at IS NULL
        AND d.content_hash = rag._ingest_hash(document_unchanged.body, document_unchanged.format,
            document_unchanged.chunker_version, document_unchanged.title, document_unchanged.source_url,
            document_unchanged.metadata);
END
$fn$;
COMMENT ON FUNCTION rag.document_unchanged(text, text, text, text, integer, text, text, jsonb) IS
'The current version of a document, with status unchanged, when rag.ingest or rag.store_parsed of this body '
'(format, chunker version, title, source_url, metadata) would change nothing; no row otherwise. A client checks '
'this before it parses and embeds. Refuses what rag.ingest refuses before parsing (42501, 42704, 22004, 22023, '
'54000).';

-- At most as many hashes as a document may have chunks (one per 64 bytes of max_document_bytes): each is an
-- index probe and, when found, a call of rag._reused_sentences (security round 3: any number was taken).
CREATE OR REPLACE FUNCTION rag.embedded_texts(tenant text, hashes bytea[])
RETURNS TABLE (content_hash bytea)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_hashes bigint := (rag._setting('max_document_bytes', 20 * 1024 * 1024) / 64)::bigint;
BEGIN
    IF coalesce(pg_catalog.cardinality(embedded_texts.hashes), 0) > max_hashes THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('%s hashes are over the limit of %s per call (one per 64 bytes of '
                'max_document_bytes)', pg_catalog.cardinality(embedded_texts.hashes), max_hashes),
            HINT = 'Ask about one document''s chunk texts at a time.';
    END IF;
    RETURN QUERY
    SELECT e.content_hash
    FROM rag._reused_embeddings(current_user, embedded_texts.tenant, rag.model_name(), embedded_texts.hashes) AS e
    WHERE EXISTS (
        SELECT FROM rag._reused_sentences(current_user, embedded_texts.tenant, rag.model_name(),
            ARRAY[e.content_hash]) AS s
    );
END
$fn$;
COMMENT ON FUNCTION rag.embedded_texts(text, bytea[]) IS
'Which of these chunk text hashes (sha256 of the UTF-8 of title, blank line, content) the tenant already has '
'embedded with the database''s model, sentences included: a client leaves their embeddings out of '
'rag.store_parsed, which copies the stored ones, as rag.ingest reuses them. 54000 for more hashes than a '
'document may have chunks (max_document_bytes / 64).';

-- Chunks whose embedding a client left out (null) get the stored embedding and sentences of the same text in
-- this tenant (rag.embedded_texts said it has them); a chunk with neither stays without and is refused. Built
-- as arrays of vectors, as rag.ingest does, after counting what would be copied: items are a few bytes each,
-- what they copy is not (an earlier version built JSON, about 64 kB of memory per copied sentence, and had no
-- bound: 55 kB of items held 2.1 GB for 7.6 s, bench/bench_reuse_copies.py).
DROP FUNCTION IF EXISTS rag._fill_stored(name, text, text, jsonb);
CREATE OR REPLACE FUNCTION rag._fill_stored(
    p_caller name, p_tenant text, p_model text, p_key text, p_chunks rag.chunk_input[],
    p_sentences rag.sentence_input[], OUT chunks rag.chunk_input[], OUT sentences rag.sentence_input[]
)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    hashes bytea[];
BEGIN
    SELECT pg_catalog.array_agg(DISTINCT pg_catalog.sha256(pg_catalog.convert_to(
        rag._embed_text(c.title, c.content), 'UTF8')))
    INTO hashes
    FROM pg_catalog.unnest(p_chunks) AS c
    WHERE c.embedding IS NULL AND c.content IS NOT NULL;
    IF hashes IS NULL THEN
        chunks := p_chunks;
        sentences := p_sentences;
        RETURN;
    END IF;
    -- what the copies would add up to, before any is made
    PERFORM rag._check_vectors(p_key, coalesce(pg_catalog.cardinality(p_chunks), 0)
        + coalesce(pg_catalog.cardinality(p_sentences), 0) + (
            SELECT coalesce(sum(n.n), 0)::bigint
            FROM pg_catalog.unnest(p_chunks) AS c
            INNER JOIN (
                SELECT r.content_hash, r.content_length, count(*) AS n
                FROM rag._reused_spans(p_caller, p_tenant, p_model, hashes) AS r
                GROUP BY r.content_hash, r.content_length
            ) AS n ON n.content_hash = pg_catalog.sha256(pg_catalog.convert_to(
                rag._embed_text(c.title, c.content), 'UTF8')) AND n.content_length = pg_catalog.length(c.content)
            WHERE c.embedding IS NULL));
    WITH c AS (
        SELECT x.anchor, x.section_path, x.title, x.content, x.token_count, x.embedding, x.o,
            CASE WHEN x.embedding IS NULL THEN pg_catalog.sha256(pg_catalog.convert_to(
                rag._embed_text(x.title, x.content), 'UTF8')) END AS h
        FROM pg_catalog.unnest(p_chunks) WITH ORDINALITY AS x (
            anchor, section_path, title, content, token_count, embedding, o
        )
    )
    SELECT pg_catalog.array_agg(ROW(c.anchor, c.section_path, c.title, c.content, c.token_count,
        coalesce(c.embedding, e.embedding))::rag.chunk_input ORDER BY c.o)
    INTO chunks
    FROM c
    LEFT JOIN rag._reused_embeddings(p_caller, p_tenant, p_model, hashes) AS e ON e.content_hash = c.h;
    -- sentences: the caller's for chunks it embedded, the stored ones for chunks filled here
    WITH c AS (
        SELECT x.o::integer AS o, pg_catalog.length(x.content) AS len, pg_catalog.sha256(pg_catalog.convert_to(
            rag._embed_text(x.title, x.content), 'UTF8')) AS h
        FROM pg_catalog.unnest(p_chunks) WITH ORDINALITY AS x (
            anchor, section_path, title, content, token_count, embedding, o
        )
        WHERE x.embedding IS NULL
    )
    SELECT pg_catalog.array_agg(s.x)
    INTO sentences
    FROM (
        SELECT x::rag.sentence_input AS x
        FROM pg_catalog.unnest(p_sentences) AS x
        WHERE NOT EXISTS (SELECT FROM c WHERE c.o = x.chunk_ord)
        UNION ALL
        SELECT ROW(c.o, r.start_pos, r.end_pos, r.embedding)::rag.sentence_input
        FROM c
        INNER JOIN rag._reused_spans(p_caller, p_tenant, p_model, hashes) AS r
            ON r.content_hash = c.h AND r.content_length = c.len
    ) AS s;
END
$fn$;
COMMENT ON FUNCTION rag._fill_stored(name, text, text, text, rag.chunk_input[], rag.sentence_input[]) IS
'Internal: chunks without an embedding completed with the stored embedding and sentences of the same text '
'(54000 before copying when the document would be over rag._check_vectors).';

CREATE OR REPLACE FUNCTION rag._store_parsed(
    p_caller name, p_tenant text, p_key text, p_body text, p_format text, p_parsed jsonb, p_title text,
    p_source_url text, p_metadata jsonb
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_model text := rag.model_name();
    v_chunker integer;
    v_format text := p_parsed ->> 'format';
    v_empty integer;
    doc_hash bytea;
    inputs record;
BEGIN
    PERFORM rag._check_ingest(p_caller, p_tenant, p_key, p_body, p_format);
    IF p_parsed IS NULL OR pg_catalog.jsonb_typeof(p_parsed) <> 'object'
        OR pg_catalog.jsonb_typeof(p_parsed -> 'chunks') IS DISTINCT FROM 'array'
        OR pg_catalog.jsonb_typeof(p_parsed -> 'chunker_version') IS DISTINCT FROM 'number'
        OR v_format IS NULL OR v_format NOT IN ('html', 'markdown', 'text')
        OR pg_catalog.jsonb_typeof(p_parsed -> 'empty_sections') NOT IN ('number', 'array') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'parsed must be an object {model, format, chunker_version, title, empty_sections, chunks}',
            HINT = 'format: html, markdown or text (the detected one); chunks: an array of items as '
                'rag.store_document takes them (may be empty).';
    END IF;
    IF (p_parsed ->> 'model') IS DISTINCT FROM v_model THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = pg_catalog.format('document "%s" is embedded with model "%s", the database''s is "%s"',
                p_key, coalesce(p_parsed ->> 'model', 'NULL'), v_model),
            HINT = 'Embed with the model rag.model_name() names.';
    END IF;
    BEGIN
        v_chunker := (p_parsed ->> 'chunker_version')::integer;
        v_empty := CASE WHEN pg_catalog.jsonb_typeof(p_parsed -> 'empty_sections') = 'array'
            THEN pg_catalog.jsonb_array_length(p_parsed -> 'empty_sections')
            ELSE (p_parsed ->> 'empty_sections')::integer END;
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'parsed.chunker_version and parsed.empty_sections must be integers',
            DETAIL = SQLERRM;
    END;
    doc_hash := rag._ingest_hash(p_body, p_format, v_chunker, p_title, p_source_url, p_metadata);
    IF rag._lock_document(p_caller, p_tenant, p_key, doc_hash) THEN
        RETURN QUERY SELECT d.doc_key, d.version, 'unchanged'::text, d.chunk_count, d.empty_sections
        FROM rag.document AS d WHERE d.tenant = p_tenant AND d.doc_key = p_key AND d.retired_at IS NULL;
        RETURN;
    END IF;
    SELECT * INTO inputs FROM rag._item_inputs(p_parsed -> 'chunks');
    SELECT * INTO inputs FROM rag._fill_stored(p_caller, p_tenant, v_model, p_key, inputs.chunks, inputs.sentences);
    RETURN QUERY SELECT * FROM rag._store_version(p_caller, p_tenant, p_key, doc_hash, v_format,
        coalesce(p_title, p_parsed ->> 'title'), p_source_url, p_metadata, v_empty, v_model, inputs.chunks,
        inputs.sentences);
END
$fn$;
COMMENT ON FUNCTION rag._store_parsed(name, text, text, text, text, jsonb, text, text, jsonb) IS
'Internal (SECURITY DEFINER: writes documents and chunks): rag.store_parsed for the checked caller.';

CREATE OR REPLACE FUNCTION rag.store_parsed(
    tenant text, key text, body text, format text, parsed jsonb, title text DEFAULT NULL,
    source_url text DEFAULT NULL, metadata jsonb DEFAULT '{}'
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._store_parsed(current_user, store_parsed.tenant, store_parsed.key, store_parsed.body,
        store_parsed.format, store_parsed.parsed, store_parsed.title, store_parsed.source_url,
        store_parsed.metadata)
$fn$;
COMMENT ON FUNCTION rag.store_parsed(text, text, text, text, jsonb, text, text, jsonb) IS
'Stores a document the client parsed, chunked and embedded as rag.ingest would (pgcite ingest --client-side): '
'body and format as given to rag.ingest; parsed = {model (must be rag.model_name(): 55000), format (detected), '
'chunker_version, title, empty_sections, chunks: items as rag.store_document takes them; an item without '
'embedding reuses the stored one of its text, see rag.embedded_texts}. Hashed like '
'rag.ingest (unchanged body: status unchanged); same versioning and statuses (inserted, updated, unchanged, empty).';

REVOKE ALL ON FUNCTION rag.document_unchanged(text, text, text, text, integer, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.embedded_texts(text, bytea[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.embedded_texts(text, bytea[]) TO pgcite_writer;
REVOKE ALL ON FUNCTION rag.store_parsed(text, text, text, text, jsonb, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.document_unchanged(text, text, text, text, integer, text, text, jsonb) TO pgcite_writer;
GRANT EXECUTE ON FUNCTION rag.store_parsed(text, text, text, text, jsonb, text, text, jsonb) TO pgcite_writer;
