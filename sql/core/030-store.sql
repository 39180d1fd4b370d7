-- Store: a parsed, embedded document becomes an immutable version of chunk rows.
-- rag.ingest (pgcite_python) parses and embeds inside PostgreSQL and calls rag._store_version;
-- rag.store_document is the same path for callers that chunk and embed outside (no PL/Python).

CREATE OR REPLACE FUNCTION rag._check_document(p_tenant text, p_doc_key text, p_body text)
RETURNS rag.tenant
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(p_tenant);
    max_bytes bigint := rag._setting('pgcite.max_document_bytes', 20 * 1024 * 1024)::bigint;
BEGIN
    IF p_doc_key IS NULL OR pg_catalog.btrim(p_doc_key) = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'doc_key must not be NULL or empty',
            HINT = 'Give every document a stable key, such as its path or URL.';
    END IF;
    IF p_body IS NULL OR pg_catalog.btrim(p_body, E' \t\n\r\f\v') = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('document "%s" is empty', p_doc_key),
            HINT = 'To remove a document use rag.delete_document(tenant, doc_key).';
    END IF;
    IF pg_catalog.octet_length(p_body) > max_bytes THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('document "%s" is %s bytes, over the limit of %s bytes',
                p_doc_key, pg_catalog.octet_length(p_body), max_bytes),
            HINT = 'Split the document, or raise the setting pgcite.max_document_bytes.';
    END IF;
    RETURN t;
END
$fn$;
COMMENT ON FUNCTION rag._check_document(text, text, text) IS
'Internal: validates tenant, key and body of a document before anything is written.';

-- Claims the tenant's embedding model on first use; a different model later is an error.
CREATE OR REPLACE FUNCTION rag._claim_model(p_tenant text, p_model text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    current_model text;
BEGIN
    PERFORM rag._require_tenant(p_tenant);
    UPDATE rag.tenant SET model = p_model WHERE tenant = p_tenant AND model IS NULL;
    SELECT model INTO current_model FROM rag.tenant WHERE tenant = p_tenant;
    IF current_model <> p_model THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = pg_catalog.format('tenant "%s" is embedded with model "%s", not "%s"',
                p_tenant, current_model, p_model),
            HINT = 'A corpus never mixes models: set pgcite.model back, or re-embed into a new tenant.';
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._claim_model(text, text) IS
'Internal: records the tenant''s embedding model on first ingest; 55000 if a different one is used later.';

CREATE OR REPLACE FUNCTION rag._document_hash(
    p_body text, p_format text, p_title text, p_source_url text, p_metadata jsonb
)
RETURNS bytea
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.sha256(pg_catalog.convert_to(
        pg_catalog.concat_ws(E'\x1f', p_format, p_title, p_source_url, p_metadata::text, p_body), 'UTF8'))
$fn$;
COMMENT ON FUNCTION rag._document_hash(text, text, text, text, jsonb) IS
'Internal: the hash that decides whether a re-ingested document is unchanged.';

-- The text that is embedded for a chunk, and the hash by which its embedding is reused.
CREATE OR REPLACE FUNCTION rag._embed_text(p_title text, p_content text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN coalesce(p_title, '') = '' THEN p_content ELSE p_title || E'\n\n' || p_content END
$fn$;
COMMENT ON FUNCTION rag._embed_text(text, text) IS
'Internal: the text embedded for a chunk (title, blank line, content).';

-- Serialises writers of one document (two sessions ingesting the same key never interleave) and
-- tells whether the current version already has this hash.
CREATE OR REPLACE FUNCTION rag._lock_document(p_tenant text, p_doc_key text, p_hash bytea)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(
        pg_catalog.hashtextextended(p_tenant || E'\x1f' || p_doc_key, 7411));
    RETURN EXISTS (
        SELECT FROM rag.document AS d
        WHERE d.tenant = p_tenant AND d.doc_key = p_doc_key AND d.retired_at IS NULL AND d.content_hash = p_hash
    );
END
$fn$;
COMMENT ON FUNCTION rag._lock_document(text, text, bytea) IS
'Internal: locks one document key for this transaction; true when its current version has this hash.';

CREATE OR REPLACE FUNCTION rag._store_version(
    p_tenant text, p_doc_key text, p_hash bytea, p_format text, p_title text, p_source_url text,
    p_metadata jsonb, p_empty_sections integer, p_model text, p_chunks rag.chunk_input[]
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(p_tenant);
    prev rag.document;
    new_version integer;
    new_id bigint;
    n integer := coalesce(pg_catalog.cardinality(p_chunks), 0);
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.unnest(p_chunks) AS c WHERE c.embedding IS NULL
               OR coalesce(pg_catalog.btrim(c.content), '') = '') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'every chunk needs non-empty content and an embedding';
    END IF;
    PERFORM rag._claim_model(p_tenant, p_model);

    SELECT d.* INTO prev FROM rag.document AS d
    WHERE d.tenant = p_tenant AND d.doc_key = p_doc_key AND d.retired_at IS NULL;
    SELECT coalesce(max(d.version), 0) + 1 INTO new_version FROM rag.document AS d
    WHERE d.tenant = p_tenant AND d.doc_key = p_doc_key;

    IF prev.document_id IS NOT NULL THEN
        UPDATE rag.document AS d SET retired_at = pg_catalog.now() WHERE d.document_id = prev.document_id;
        UPDATE rag.chunk AS c SET retired_at = pg_catalog.now()
        WHERE c.document_id = prev.document_id AND c.retired_at IS NULL;
    END IF;

    INSERT INTO rag.document AS d (
        tenant, doc_key, version, content_hash, title, source_url, metadata, format, chunk_count, empty_sections
    )
    VALUES (p_tenant, p_doc_key, new_version, p_hash, p_title, p_source_url, coalesce(p_metadata, '{}'),
            p_format, n, coalesce(p_empty_sections, 0))
    RETURNING d.document_id INTO new_id;

    INSERT INTO rag.chunk (
        tenant, document_id, doc_key, doc_version, chunk_index, anchor, section_path, title, content,
        content_hash, token_count, embedding, model, ts_config
    )
    SELECT p_tenant, new_id, p_doc_key, new_version, (c.ord - 1)::integer, c.anchor,
           coalesce(c.section_path, ''), coalesce(c.title, ''), c.content,
           pg_catalog.sha256(pg_catalog.convert_to(rag._embed_text(c.title, c.content), 'UTF8')),
           coalesce(c.token_count, 0), c.embedding, p_model, t.ts_config
    FROM pg_catalog.unnest(p_chunks) WITH ORDINALITY AS c (
        anchor, section_path, title, content, token_count, embedding, ord
    );

    INSERT INTO rag.term (tenant, term)
    SELECT DISTINCT p_tenant, w.term
    FROM pg_catalog.unnest(p_chunks) AS c,
        pg_catalog.regexp_split_to_table(pg_catalog.lower(c.title || ' ' || c.content), '[^[:alnum:]_]+') AS w (term)
    WHERE pg_catalog.length(w.term) BETWEEN 3 AND 40 AND w.term !~ '^[0-9_]+$'
    ON CONFLICT DO NOTHING;

    -- A document whose sections are all empty (a table of contents) is recorded, with no chunks, as 'empty'.
    RETURN QUERY SELECT p_doc_key, new_version,
        CASE WHEN n = 0 THEN 'empty' WHEN prev.document_id IS NULL THEN 'inserted' ELSE 'updated' END, n,
        coalesce(p_empty_sections, 0);
END
$fn$;
COMMENT ON FUNCTION rag._store_version(
    text, text, bytea, text, text, text, jsonb, integer, text, rag.chunk_input[]
) IS
'Internal: writes a new document version and its chunks, retiring the previous version. Caller holds the lock.';

CREATE OR REPLACE FUNCTION rag.store_document(
    tenant text, key text, items jsonb, title text DEFAULT NULL, source_url text DEFAULT NULL,
    metadata jsonb DEFAULT '{}'
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p_tenant text := store_document.tenant;
    p_key text := store_document.key;
    body_hash bytea;
    rows_in rag.chunk_input [];
BEGIN
    IF store_document.items IS NULL OR pg_catalog.jsonb_typeof(store_document.items) <> 'array'
        OR pg_catalog.jsonb_array_length(store_document.items) = 0 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'items must be a non-empty JSON array of chunks',
            HINT = 'Each element: {"content": ..., "embedding": [384 numbers], "title", "anchor", "section_path"}.';
    END IF;
    PERFORM rag._check_document(p_tenant, p_key, store_document.items::text);
    body_hash := rag._document_hash(store_document.items::text, 'chunks', store_document.title,
        store_document.source_url, store_document.metadata);
    IF rag._lock_document(p_tenant, p_key, body_hash) THEN
        RETURN QUERY SELECT d.doc_key, d.version, 'unchanged'::text, d.chunk_count, d.empty_sections
        FROM rag.document AS d WHERE d.tenant = p_tenant AND d.doc_key = p_key AND d.retired_at IS NULL;
        RETURN;
    END IF;
    BEGIN
        SELECT pg_catalog.array_agg(ROW(
            e ->> 'anchor', e ->> 'section_path', coalesce(e ->> 'title', ''), e ->> 'content',
            coalesce((e ->> 'token_count')::integer, 0), (e -> 'embedding')::text::public.vector(384)
        )::rag.chunk_input ORDER BY o)
        INTO rows_in
        FROM pg_catalog.jsonb_array_elements(store_document.items) WITH ORDINALITY AS x (e, o);
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'a chunk''s embedding is not a vector of 384 numbers',
            DETAIL = SQLERRM;
    END;
    RETURN QUERY SELECT * FROM rag._store_version(p_tenant, p_key, body_hash, 'chunks', store_document.title,
        store_document.source_url, store_document.metadata, 0, rag.model_name(), rows_in);
END
$fn$;
COMMENT ON FUNCTION rag.store_document(text, text, jsonb, text, text, jsonb) IS
'Stores a document chunked and embedded outside PostgreSQL (no PL/Python needed): items is a JSON array of '
'{content, embedding[384], title, anchor, section_path, token_count}. Same versioning as rag.ingest.';

CREATE OR REPLACE FUNCTION rag.delete_document(tenant text, doc_key text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    doc_id bigint;
BEGIN
    PERFORM rag._require_tenant(delete_document.tenant);
    PERFORM rag._lock_document(delete_document.tenant, delete_document.doc_key, ''::bytea);
    UPDATE rag.document AS d SET retired_at = pg_catalog.now()
    WHERE d.tenant = delete_document.tenant AND d.doc_key = delete_document.doc_key AND d.retired_at IS NULL
    RETURNING d.document_id INTO doc_id;
    IF doc_id IS NULL THEN
        RETURN false;
    END IF;
    UPDATE rag.chunk AS c SET retired_at = pg_catalog.now() WHERE c.document_id = doc_id AND c.retired_at IS NULL;
    RETURN true;
END
$fn$;
COMMENT ON FUNCTION rag.delete_document(text, text) IS
'Retires the current version of a document: its chunks stay (old citations and audit records still resolve) '
'but are never retrieved again. False when there was no current version.';

REVOKE ALL ON FUNCTION rag.store_document(text, text, jsonb, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.delete_document(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.store_document(text, text, jsonb, text, text, jsonb) TO pgcite_writer;
GRANT EXECUTE ON FUNCTION rag.delete_document(text, text) TO pgcite_writer;
