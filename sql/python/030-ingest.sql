-- rag.ingest: one call, one transaction: parse -> chunk -> embed (reusing stored embeddings) -> store.

CREATE OR REPLACE FUNCTION rag.ingest(
    tenant text, key text, body text, format text DEFAULT 'auto', title text DEFAULT NULL,
    source_url text DEFAULT NULL, metadata jsonb DEFAULT '{}'
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p_tenant text := ingest.tenant;
    p_key text := ingest.key;
    fmt text := lower(coalesce(ingest.format, 'auto'));
    doc_hash bytea;
    parsed jsonb;
    items rag.chunk_input [];
    sentences rag.sentence_input [];
    v_model text := rag.model_name();
BEGIN
    PERFORM rag._check_ingest(current_user, p_tenant, p_key, ingest.body, ingest.format);
    -- The chunker's version is part of the hash: after an upgrade that changes chunking, the same body is
    -- re-chunked (a new version; unchanged chunk texts keep their embeddings) rather than "unchanged".
    -- rag.store_parsed (a client that parsed it) hashes a body the same way.
    doc_hash := rag._ingest_hash(ingest.body, fmt, rag._chunker_version(), ingest.title, ingest.source_url,
        ingest.metadata);
    IF rag._lock_document(current_user, p_tenant, p_key, doc_hash) THEN
        RETURN QUERY SELECT d.doc_key, d.version, 'unchanged'::text, d.chunk_count, d.empty_sections
        FROM rag.document AS d WHERE d.tenant = p_tenant AND d.doc_key = p_key AND d.retired_at IS NULL;
        RETURN;
    END IF;

    parsed := rag._parsed(ingest.body, fmt, 256, 32);

    -- What the stored sentences of these chunk texts add up to, before any is copied: a body of many copies of
    -- a text stored with many short sentences would otherwise copy gigabytes (rag._check_vectors, 54000).
    PERFORM rag._check_vectors(p_key, (
        WITH c AS (
            SELECT pg_catalog.sha256(pg_catalog.convert_to(rag._embed_text(e.j ->> 'title', e.j ->> 'content'),
                'UTF8')) AS h, pg_catalog.length(e.j ->> 'content') AS len
            FROM pg_catalog.jsonb_array_elements(parsed -> 'chunks') AS e (j)
        )
        SELECT pg_catalog.count(*) + coalesce(sum(n.n), 0)
        FROM c
        LEFT JOIN (
            SELECT r.content_hash, r.content_length, pg_catalog.count(*) AS n
            FROM rag._reused_spans(current_user, p_tenant, v_model,
                (SELECT pg_catalog.array_agg(DISTINCT c2.h) FROM c AS c2)) AS r
            GROUP BY r.content_hash, r.content_length
        ) AS n ON n.content_hash = c.h AND n.content_length = c.len
    )::bigint);

    -- Embeddings: reuse the stored one for a text this tenant already embedded with this model,
    -- embed the rest in one batched call.
    WITH c AS (
        SELECT
            e.o,
            e.j ->> 'anchor' AS anchor,
            e.j ->> 'section_path' AS section_path,
            e.j ->> 'title' AS title,
            e.j ->> 'content' AS content,
            (e.j ->> 'token_count')::integer AS token_count,
            pg_catalog.sha256(pg_catalog.convert_to(rag._embed_text(e.j ->> 'title', e.j ->> 'content'), 'UTF8'))
                AS h
        FROM pg_catalog.jsonb_array_elements(parsed -> 'chunks') WITH ORDINALITY AS e (j, o)
    ),
    reused AS (
        SELECT c.o, s.embedding
        FROM c
        INNER JOIN rag._reused_embeddings(current_user, p_tenant, v_model,
            (SELECT pg_catalog.array_agg(c2.h) FROM c AS c2)) AS s ON s.content_hash = c.h
    ),
    todo AS (
        SELECT
            pg_catalog.array_agg(c.o ORDER BY c.o) AS ords,
            pg_catalog.array_agg(rag._embed_text(c.title, c.content) ORDER BY c.o) AS texts
        FROM c
        WHERE NOT EXISTS (SELECT FROM reused AS r WHERE r.o = c.o)
    ),
    fresh AS (
        SELECT todo.ords[m.ord] AS o, m.embedding
        FROM todo, rag.embed_many(todo.texts) AS m
        WHERE todo.texts IS NOT NULL
    )
    SELECT pg_catalog.array_agg(
        ROW(c.anchor, c.section_path, c.title, c.content, c.token_count, coalesce(r.embedding, f.embedding)
        )::rag.chunk_input ORDER BY c.o)
    INTO items
    FROM c
    LEFT JOIN reused AS r ON r.o = c.o
    LEFT JOIN fresh AS f ON f.o = c.o;

    -- Sentences of every chunk, for choosing quotes at ask time: copied from a stored chunk with the same text
    -- (and content: rag._reused_spans), else split (rag._sentence_spans) and embedded now in one batched call.
    WITH c AS (
        SELECT e.o::integer AS o, e.j ->> 'content' AS content,
            pg_catalog.sha256(pg_catalog.convert_to(rag._embed_text(e.j ->> 'title', e.j ->> 'content'), 'UTF8'))
                AS h
        FROM pg_catalog.jsonb_array_elements(parsed -> 'chunks') WITH ORDINALITY AS e (j, o)
    ),
    reused AS (
        SELECT c.o, r.start_pos, r.end_pos, r.embedding
        FROM c
        INNER JOIN rag._reused_spans(current_user, p_tenant, v_model,
            (SELECT pg_catalog.array_agg(c2.h) FROM c AS c2)) AS r
            ON r.content_hash = c.h AND r.content_length = pg_catalog.length(c.content)
    ),
    spans AS (
        SELECT sp.chunk_ord, sp.start_pos, sp.end_pos,
            pg_catalog.substr(c.content, sp.start_pos + 1, sp.end_pos - sp.start_pos) AS txt
        FROM rag._sentence_spans((SELECT pg_catalog.array_agg(c2.content ORDER BY c2.o) FROM c AS c2)) AS sp
        INNER JOIN c ON c.o = sp.chunk_ord
        WHERE NOT EXISTS (SELECT FROM reused AS r WHERE r.o = sp.chunk_ord)
    ),
    todo AS (
        SELECT
            pg_catalog.array_agg(spans.chunk_ord ORDER BY spans.chunk_ord, spans.start_pos) AS ords,
            pg_catalog.array_agg(spans.start_pos ORDER BY spans.chunk_ord, spans.start_pos) AS starts,
            pg_catalog.array_agg(spans.end_pos ORDER BY spans.chunk_ord, spans.start_pos) AS ends,
            pg_catalog.array_agg(spans.txt ORDER BY spans.chunk_ord, spans.start_pos) AS texts
        FROM spans
    ),
    fresh AS (
        SELECT todo.ords[m.ord] AS o, todo.starts[m.ord] AS start_pos, todo.ends[m.ord] AS end_pos, m.embedding
        FROM todo, rag.embed_many(todo.texts) AS m
        WHERE todo.texts IS NOT NULL
    )
    SELECT pg_catalog.array_agg(ROW(x.o, x.start_pos, x.end_pos, x.embedding)::rag.sentence_input)
    INTO sentences
    FROM (SELECT * FROM reused UNION ALL SELECT * FROM fresh) AS x;

    RETURN QUERY SELECT * FROM rag._store_version(
        current_user, p_tenant, p_key, doc_hash, parsed ->> 'format', coalesce(ingest.title, parsed ->> 'title'),
        ingest.source_url, ingest.metadata, pg_catalog.jsonb_array_length(parsed -> 'empty_sections'), v_model, items,
        sentences
    );
END
$fn$;
COMMENT ON FUNCTION rag.ingest(text, text, text, text, text, text, jsonb) IS
'Ingests one document in one transaction: parse, chunk, embed in-database (reusing stored embeddings of '
'unchanged text), store a new immutable version. status: inserted, updated, unchanged (no work done) or empty '
'(every section empty, e.g. a table of contents: recorded with no chunks).';

REVOKE ALL ON FUNCTION rag.ingest(text, text, text, text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.ingest(text, text, text, text, text, text, jsonb) TO pgcite_writer;
