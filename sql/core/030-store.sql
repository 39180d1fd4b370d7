-- Store: a parsed, embedded document becomes an immutable version of chunk rows.
-- rag.ingest (pgcite_python) parses and embeds inside PostgreSQL and calls rag._store_version;
-- rag.store_document is the same path for callers that chunk and embed outside (no PL/Python).

-- 54000 when a document (its body, or the text of its chunks) is over the setting max_document_bytes.
CREATE OR REPLACE FUNCTION rag._check_bytes(p_doc_key text, p_bytes bigint)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_bytes bigint := rag._setting('max_document_bytes', 20 * 1024 * 1024)::bigint;
BEGIN
    IF coalesce(p_bytes, 0) > max_bytes THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('document "%s" is %s bytes, over the limit of %s bytes',
                p_doc_key, p_bytes, max_bytes),
            HINT = 'Split the document, or have an admin raise it: SELECT rag.set_config(''max_document_bytes'', ...).';
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._check_bytes(text, bigint) IS
'Internal: 54000 when a document of p_bytes bytes is over the setting max_document_bytes.';

-- 54000 when a document would store more embeddings (chunks and sentences) than one per 64 bytes of the setting
-- max_document_bytes (327,680 at its default). Stored embeddings are reused by text hash, so without this a
-- short payload of many copies of a stored chunk text (with many one-character sentences) made one call copy,
-- hold and store gigabytes of vectors.
CREATE OR REPLACE FUNCTION rag._check_vectors(p_doc_key text, p_count bigint)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_vectors bigint := (rag._setting('max_document_bytes', 20 * 1024 * 1024) / 64)::bigint;
BEGIN
    IF coalesce(p_count, 0) > max_vectors THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('document "%s" has %s chunks and sentences, over the limit of %s '
                '(one per 64 bytes of max_document_bytes)', p_doc_key, p_count, max_vectors),
            HINT = 'Split the document, or have an admin raise it: SELECT rag.set_config(''max_document_bytes'', ...).';
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._check_vectors(text, bigint) IS
'Internal: 54000 when a document has more chunks plus sentences than max_document_bytes / 64.';

CREATE OR REPLACE FUNCTION rag._check_document(p_doc_key text, p_body text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_doc_key IS NULL OR pg_catalog.btrim(p_doc_key) = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'doc_key must not be NULL or empty',
            HINT = 'Give every document a stable key, such as its path or URL.';
    END IF;
    IF p_body IS NULL OR pg_catalog.btrim(p_body, E' \t\n\r\f\x0B') = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('document "%s" is empty', p_doc_key),
            HINT = 'To remove a document use rag.delete_document(tenant, doc_key).';
    END IF;
    PERFORM rag._check_bytes(p_doc_key, pg_catalog.octet_length(p_body));
END
$fn$;
COMMENT ON FUNCTION rag._check_document(text, text) IS
'Internal: validates the key and body of a document before anything is written (22023, 54000 over the limit).';

-- Claims the tenant's embedding model on first use; a different model later is an error.
CREATE OR REPLACE FUNCTION rag._claim_model(p_tenant text, p_model text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    current_model text;
BEGIN
    UPDATE rag.tenant SET model = p_model WHERE tenant = p_tenant AND model IS NULL;
    SELECT model INTO current_model FROM rag.tenant WHERE tenant = p_tenant;
    IF current_model <> p_model THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = pg_catalog.format('tenant "%s" is embedded with model "%s", not "%s"',
                p_tenant, current_model, p_model),
            HINT = 'A corpus never mixes models: set the setting model back, or re-embed into a new tenant.';
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
        pg_catalog.jsonb_build_array(p_format, p_title, p_source_url, p_metadata)::text || E'\n' || p_body, 'UTF8'))
$fn$;
COMMENT ON FUNCTION rag._document_hash(text, text, text, text, jsonb) IS
'Internal: the hash that decides whether a re-ingested document is unchanged (every field, NULL distinct from '
'any text, so a title and a URL swapped between NULL and a value make a new version).';

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

-- Serialises writers of one document (two sessions ingesting the same key never interleave) with a row lock
-- on the key's row in rag.document_key, which only pgcite_owner can lock, and tells whether the current
-- version already has this hash. SECURITY DEFINER: it writes rag.document_key; it checks the caller first.
CREATE OR REPLACE FUNCTION rag._lock_document(p_caller name, p_tenant text, p_doc_key text, p_hash bytea)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'write');
    -- A doc_key is a key of B-tree indexes (with the tenant; in rag.chunk_title_order_idx with a title's hash
    -- too), whose entries hold at most 2,704 bytes: past about 2,650 bytes a key that did not compress failed in
    -- rag.document_key's index with the server's own message. Since 0.9.0 (session 24) a new key is at most
    -- 2,048 bytes; a longer one stored before stays usable (replaced, deleted).
    IF pg_catalog.octet_length(p_doc_key) > 2048 AND NOT EXISTS (
        SELECT FROM rag.document_key AS k WHERE k.tenant = p_tenant AND k.doc_key = p_doc_key
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('doc_key is %s bytes, over 2048', pg_catalog.octet_length(p_doc_key)),
            HINT = 'Use a shorter stable key, such as a path, or a hash of a long URL.';
    END IF;
    INSERT INTO rag.document_key AS k (tenant, doc_key) VALUES (p_tenant, p_doc_key) ON CONFLICT DO NOTHING;
    PERFORM FROM rag.document_key AS k WHERE k.tenant = p_tenant AND k.doc_key = p_doc_key FOR UPDATE;
    RETURN EXISTS (
        SELECT FROM rag.document AS d
        WHERE d.tenant = p_tenant AND d.doc_key = p_doc_key AND d.retired_at IS NULL AND d.content_hash = p_hash
    );
END
$fn$;
COMMENT ON FUNCTION rag._lock_document(name, text, text, bytea) IS
'Internal (SECURITY DEFINER: locks a row of rag.document_key): locks one document key for this transaction; '
'true when its current version has this hash.';

-- Writes a new document version and its chunks, retiring the previous version. SECURITY DEFINER: tenant
-- roles cannot write rag.document, rag.chunk or rag.term; it checks the caller and takes the key's lock.
CREATE OR REPLACE FUNCTION rag._store_version(
    p_caller name, p_tenant text, p_doc_key text, p_hash bytea, p_format text, p_title text, p_source_url text,
    p_metadata jsonb, p_empty_sections integer, p_model text, p_chunks rag.chunk_input[],
    p_sentences rag.sentence_input[]
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._authorize(p_caller, p_tenant, 'write');
    prev rag.document;
    new_version integer;
    new_id bigint;
    n integer := coalesce(pg_catalog.cardinality(p_chunks), 0);
    max_chunk bigint := rag._setting('max_chunk_bytes', 16384)::bigint;
    big record;
BEGIN
    -- rag.ingest and rag.store_document checked their inputs, but writers may call this function directly
    PERFORM rag._check_document(p_doc_key, 'x');
    PERFORM rag._check_bytes(p_doc_key,
        (SELECT sum(pg_catalog.octet_length(c.content)) FROM pg_catalog.unnest(p_chunks) AS c));
    -- and each chunk's content apart (setting max_chunk_bytes, 16 kB; rag.ingest's chunkers keep chunks under about
    -- 2,000 characters): every rag.ask, rag.context and rag.explain that retrieves a chunk reads its content whole,
    -- for each of its readers (the gate, quote choice, verification, and for a chunk stored without sentences
    -- splitting and embedding them). Unbounded, one writer's chunk of 100,000 words cost every reader's ask that
    -- retrieved it 2.5 s (86 s before the gate read its words in one pass; session 22's review).
    SELECT c.o, pg_catalog.octet_length(c.content) AS n INTO big
    FROM pg_catalog.unnest(p_chunks) WITH ORDINALITY AS c (anchor, section_path, title, content, token_count,
        embedding, o)
    WHERE pg_catalog.octet_length(c.content) > max_chunk
    ORDER BY c.o
    LIMIT 1;
    IF big.o IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('document "%s": chunk %s has %s bytes of content, over the setting '
                'max_chunk_bytes (%s)', p_doc_key, big.o, big.n, max_chunk),
            HINT = 'Split it into smaller chunks (rag.ingest''s chunkers keep them under about 2,000 characters), or '
                'have an admin raise it: SELECT rag.set_config(''max_chunk_bytes'', ...).';
    END IF;
    -- and, apart, the rest of the text it stores: the titles, anchors and section paths of its chunks (from the
    -- client, for rag.store_parsed, outside any other limit), the document's title, source URL and metadata
    PERFORM rag._check_bytes(p_doc_key, coalesce(pg_catalog.octet_length(p_title), 0)
        + coalesce(pg_catalog.octet_length(p_source_url), 0) + coalesce(pg_catalog.octet_length(p_metadata::text), 0)
        + coalesce((
            SELECT sum(coalesce(pg_catalog.octet_length(c.title), 0) + coalesce(pg_catalog.octet_length(c.anchor), 0)
                + coalesce(pg_catalog.octet_length(c.section_path), 0))
            FROM pg_catalog.unnest(p_chunks) AS c), 0));
    -- what every citation of the document repeats into the answer, the generation prompt and the append-only log
    -- of every ask that cites it, bounded per field: a writer's 5 MB source URL was copied into each such ask's
    -- citations (security round 5). rag.ingest's chunker keeps titles to 512 characters and anchors to 256.
    -- A title is also a key of two B-tree indexes ((tenant, title): rag.chunk's and rag.tenant_title's), whose
    -- entries hold at most 2,704 bytes: over 2,400 bytes (with a tenant name of up to 63), a title that does not
    -- compress failed in the index with an internal message (session 21's review).
    IF pg_catalog.length(p_source_url) > 8192 OR EXISTS (
        SELECT FROM pg_catalog.unnest(p_chunks) AS c
        WHERE pg_catalog.octet_length(c.title) > 2400
            OR pg_catalog.length(c.anchor) > 4096 OR pg_catalog.length(c.section_path) > 8192
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('document "%s" has a source URL over 8192 characters, a chunk title over '
                '2400 bytes, an anchor over 4096 characters or a section path over 8192', p_doc_key),
            HINT = 'Citations repeat these in every answer and log entry, and titles are index keys: shorten them.';
    END IF;
    IF p_model IS DISTINCT FROM rag.model_name() OR pg_catalog.octet_length(p_hash) IS DISTINCT FROM 32
        OR coalesce(p_empty_sections, 0) < 0
        OR EXISTS (SELECT FROM pg_catalog.unnest(p_chunks) AS c WHERE c.token_count < 0) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'the model must be the setting model, the hash a sha256, and counts not negative';
    END IF;
    PERFORM rag._check_vectors(p_doc_key, n + coalesce(pg_catalog.cardinality(p_sentences), 0));
    PERFORM rag._check_chunks(p_chunks);
    PERFORM rag._check_sentences(p_chunks, p_sentences);
    PERFORM rag._lock_document(p_caller, p_tenant, p_doc_key, p_hash);
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

    INSERT INTO rag.sentence (chunk_id, ord, start_pos, end_pos, embedding, terms)
    SELECT c.chunk_id,
        (pg_catalog.row_number() OVER (PARTITION BY c.chunk_id ORDER BY x.start_pos) - 1)::integer,
        x.start_pos, x.end_pos, x.embedding,
        rag._content_terms(pg_catalog.substr(c.content, x.start_pos + 1, x.end_pos - x.start_pos))
    FROM pg_catalog.unnest(p_sentences) AS x
    INNER JOIN rag.chunk AS c ON c.document_id = new_id AND c.chunk_index = x.chunk_ord - 1;

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
    name, text, text, bytea, text, text, text, jsonb, integer, text, rag.chunk_input[], rag.sentence_input[]
) IS
'Internal (SECURITY DEFINER: writes documents, chunks, sentences and terms): a new document version, its chunks '
'and their sentences (may be NULL), retiring the previous version, for a checked writer of the tenant.';

CREATE OR REPLACE FUNCTION rag._store_document(
    p_caller name, p_tenant text, p_key text, p_items jsonb, p_title text, p_source_url text, p_metadata jsonb
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    body_hash bytea;
    inputs record;
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'write');
    IF p_items IS NULL OR pg_catalog.jsonb_typeof(p_items) <> 'array'
        OR pg_catalog.jsonb_array_length(p_items) = 0 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'items must be a non-empty JSON array of chunks',
            HINT = 'Each element: {"content": ..., "embedding": [384 numbers], "title", "anchor", "section_path"}.';
    END IF;
    PERFORM rag._check_document(p_key, p_items::text);
    body_hash := rag._document_hash(p_items::text, 'chunks', p_title, p_source_url, p_metadata);
    IF rag._lock_document(p_caller, p_tenant, p_key, body_hash) THEN
        RETURN QUERY SELECT d.doc_key, d.version, 'unchanged'::text, d.chunk_count, d.empty_sections
        FROM rag.document AS d WHERE d.tenant = p_tenant AND d.doc_key = p_key AND d.retired_at IS NULL;
        RETURN;
    END IF;
    SELECT * INTO inputs FROM rag._item_inputs(p_items);
    RETURN QUERY SELECT * FROM rag._store_version(p_caller, p_tenant, p_key, body_hash, 'chunks', p_title,
        p_source_url, p_metadata, 0, rag.model_name(), inputs.chunks, inputs.sentences);
END
$fn$;
COMMENT ON FUNCTION rag._store_document(name, text, text, jsonb, text, text, jsonb) IS
'Internal (SECURITY DEFINER: writes documents and chunks): rag.store_document for the checked caller.';

CREATE OR REPLACE FUNCTION rag.store_document(
    tenant text, key text, items jsonb, title text DEFAULT NULL, source_url text DEFAULT NULL,
    metadata jsonb DEFAULT '{}'
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._store_document(current_user, store_document.tenant, store_document.key,
        store_document.items, store_document.title, store_document.source_url, store_document.metadata)
$fn$;
COMMENT ON FUNCTION rag.store_document(text, text, jsonb, text, text, jsonb) IS
'Stores a document chunked and embedded outside PostgreSQL (no PL/Python needed): items is a JSON array of '
'{content, embedding[384], title, anchor, section_path, token_count, sentences: [{start, end, embedding[384]}]} '
'(sentences optional: with them rag.ask chooses quotes by similarity). Same versioning as rag.ingest.';

CREATE OR REPLACE FUNCTION rag._delete_document(p_caller name, p_tenant text, p_doc_key text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    doc_id bigint;
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'write');
    IF p_doc_key IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'doc_key must not be NULL';
    END IF;
    -- a key never stored has no document to retire: false, and no row of rag.document_key is made for it (one
    -- was, for any key, '' too; session 24)
    IF NOT EXISTS (SELECT FROM rag.document_key AS k WHERE k.tenant = p_tenant AND k.doc_key = p_doc_key) THEN
        RETURN false;
    END IF;
    PERFORM rag._lock_document(p_caller, p_tenant, p_doc_key, ''::bytea);
    UPDATE rag.document AS d SET retired_at = pg_catalog.now()
    WHERE d.tenant = p_tenant AND d.doc_key = p_doc_key AND d.retired_at IS NULL
    RETURNING d.document_id INTO doc_id;
    IF doc_id IS NULL THEN
        RETURN false;
    END IF;
    UPDATE rag.chunk AS c SET retired_at = pg_catalog.now() WHERE c.document_id = doc_id AND c.retired_at IS NULL;
    RETURN true;
END
$fn$;
COMMENT ON FUNCTION rag._delete_document(name, text, text) IS
'Internal (SECURITY DEFINER: retires documents and chunks): rag.delete_document for the checked caller.';

CREATE OR REPLACE FUNCTION rag.delete_document(tenant text, doc_key text)
RETURNS boolean
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._delete_document(current_user, delete_document.tenant, delete_document.doc_key)
$fn$;
COMMENT ON FUNCTION rag.delete_document(text, text) IS
'Retires the current version of a document: its chunks stay (old citations and audit records still resolve) '
'but are never retrieved again. False when there was no current version.';

REVOKE ALL ON FUNCTION rag.store_document(text, text, jsonb, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.delete_document(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.store_document(text, text, jsonb, text, text, jsonb) TO pgcite_writer;
GRANT EXECUTE ON FUNCTION rag.delete_document(text, text) TO pgcite_writer;
