-- Sentences for extractive answers (python_udfs/pgcite_udfs/sentences.py). rag.ingest stores every chunk's
-- sentence spans with their embeddings (rag._sentence_spans, then rag.embed_many); rag.ask scores them in SQL
-- (rag._sentence_scores). Chunks stored before 0.3.0 have no sentence rows: rag._sentence_vectors splits and
-- embeds their sentences at ask time.

-- 0.2.0 scored sentences in Python (rag._score_sentences); they are scored in SQL now.
DROP FUNCTION IF EXISTS rag._score_sentences(text, public.vector, jsonb);

-- PL/Python converts its array argument before its first line runs (8 bytes per element, not cancellable): a
-- writer's rag._sentence_spans of 134 million NULLs held 1.1 GB for 10.6 s (security round 5). The splitter
-- (rag._split_sentences) is pgcite_owner's only; rag._sentence_spans checks the texts first (rag._check_texts)
-- and bounds the spans to what a document may store (one per 64 bytes of max_document_bytes).
CREATE OR REPLACE FUNCTION rag._split_sentences(contents text[], max_spans bigint)
RETURNS TABLE (chunk_ord integer, start_pos integer, end_pos integer)
LANGUAGE plpython3u
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.sentence_spans(contents, plpy, max_spans)
$fn$;
COMMENT ON FUNCTION rag._split_sentences(text[], bigint) IS
'Internal (pgcite_owner only): the sentence spans of texts checked by rag._sentence_spans; 54000 past max_spans.';

CREATE OR REPLACE FUNCTION rag._sentence_spans(contents text[])
RETURNS TABLE (chunk_ord integer, start_pos integer, end_pos integer)
LANGUAGE plpgsql
STABLE
STRICT
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF rag._check_texts('split into sentences', pg_catalog.cardinality(contents), pg_catalog.array_ndims(contents),
        pg_catalog.pg_column_size(contents)) THEN
        PERFORM rag._check_text_bytes('split into sentences', pg_catalog.cardinality(contents),
            (SELECT sum(pg_catalog.octet_length(t.t)) FROM pg_catalog.unnest(contents) AS t (t)));
    END IF;
    RETURN QUERY SELECT s.chunk_ord, s.start_pos, s.end_pos
    FROM rag._split_sentences(contents,
        greatest(1, rag._setting('max_document_bytes', 20 * 1024 * 1024)::bigint / 64)) AS s;
END
$fn$;
COMMENT ON FUNCTION rag._sentence_spans(text[]) IS
'Internal (SECURITY DEFINER, for writers: the only way to the splitter): the sentence spans of each text '
'(chunk_ord: 1-based position in the array; 0-based offsets); 54000 for more texts, bytes or spans than a '
'document may have.';

CREATE OR REPLACE FUNCTION rag._sentence_vectors(passages jsonb)
RETURNS jsonb
LANGUAGE plpython3u
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.sentence_vectors(plpy, GD, passages)
$fn$;
COMMENT ON FUNCTION rag._sentence_vectors(jsonb) IS
'Internal: every sentence of the passages [{chunk_id, content}] with its embedding: '
'[{chunk_id, start, end, embedding}] (0-based offsets), for chunks stored without sentences; NULL past 256 '
'sentences (the caller scores them lexically).';

-- Chunks stored before 0.3.0 (or by rag.store_document without sentences) have no sentence rows; rag.ask then
-- embeds their sentences on every call. This computes and stores them once, a batch of chunks at a time.
CREATE OR REPLACE FUNCTION rag._embed_sentences(p_caller name, p_tenant text, p_batch integer)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    done bigint := 0;
    total bigint;
    ids bigint [];
    added integer;
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'admin');
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('batch must be between 1 and 10000, not %s', coalesce(p_batch::text, 'NULL'));
    END IF;
    SELECT count(*) INTO total FROM rag.chunk AS c
    WHERE c.tenant = p_tenant AND c.retired_at IS NULL
        AND NOT EXISTS (SELECT FROM rag.sentence AS s WHERE s.chunk_id = c.chunk_id);
    LOOP
        SELECT pg_catalog.array_agg(x.chunk_id) INTO ids FROM (
            SELECT c.chunk_id FROM rag.chunk AS c
            WHERE c.tenant = p_tenant AND c.retired_at IS NULL
                AND NOT EXISTS (SELECT FROM rag.sentence AS s WHERE s.chunk_id = c.chunk_id)
            ORDER BY c.chunk_id
            LIMIT p_batch
        ) AS x;
        EXIT WHEN ids IS NULL;
        INSERT INTO rag.sentence (chunk_id, ord, start_pos, end_pos, embedding, terms)
        SELECT (e ->> 'chunk_id')::bigint,
            (pg_catalog.row_number() OVER (PARTITION BY e ->> 'chunk_id' ORDER BY (e ->> 'start')::integer) - 1)::integer,
            (e ->> 'start')::integer, (e ->> 'end')::integer, (e ->> 'embedding')::public.vector,
            rag._content_terms(pg_catalog.substr(c.content, (e ->> 'start')::integer + 1,
                (e ->> 'end')::integer - (e ->> 'start')::integer))
        FROM pg_catalog.jsonb_array_elements(rag._sentence_vectors((
            SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('chunk_id', c2.chunk_id, 'content', c2.content))
            FROM rag.chunk AS c2 WHERE c2.chunk_id = ANY (ids)
        ))) AS e
        INNER JOIN rag.chunk AS c ON c.chunk_id = (e ->> 'chunk_id')::bigint;
        GET DIAGNOSTICS added = ROW_COUNT;
        EXIT WHEN added = 0;
        done := done + pg_catalog.cardinality(ids);
        RAISE NOTICE 'embed_sentences: % of % chunks', done, total;
    END LOOP;
    RETURN done;
END
$fn$;
COMMENT ON FUNCTION rag._embed_sentences(name, text, integer) IS
'Internal (SECURITY DEFINER: writes rag.sentence): rag.embed_sentences for the checked caller.';

CREATE OR REPLACE FUNCTION rag.embed_sentences(tenant text, batch integer DEFAULT 256)
RETURNS bigint
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._embed_sentences(current_user, embed_sentences.tenant, embed_sentences.batch)
$fn$;
COMMENT ON FUNCTION rag.embed_sentences(text, integer) IS
'Stores the sentences (offsets, embeddings, content words) of a tenant''s live chunks that have none (stored '
'before 0.3.0, or by rag.store_document without sentences), batch chunks at a time with a NOTICE per batch; '
'returns how many chunks it did. Until then rag.ask embeds those sentences on every call. Needs pgcite_admin.';

REVOKE ALL ON FUNCTION rag.embed_sentences(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.embed_sentences(text, integer) TO pgcite_admin;
