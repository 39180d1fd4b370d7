-- Audit: the hash chain of rag.ask_log, its check, replay of a logged ask, and explain.

-- The canonical text of a log entry that its hash covers (jsonb text is deterministic; time as epoch).
CREATE OR REPLACE FUNCTION rag._log_payload(l rag.ask_log)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.jsonb_build_object(
        'ask_id', l.ask_id, 'tenant', l.tenant, 'seq', l.seq, 'role_name', l.role_name,
        'asked_at', extract(EPOCH FROM l.asked_at), 'question', l.question, 'k', l.k, 'options', l.options,
        'settings', l.settings, 'model', l.model, 'query_embedding_supplied', l.query_embedding_supplied,
        'query_embedding', l.query_embedding::text, 'chunk_ids', l.chunk_ids, 'status', l.status,
        'reason', l.reason, 'answer', l.answer, 'citations', l.citations, 'evidence', l.evidence,
        'timings', l.timings, 'fingerprint', l.fingerprint
    )::text
$fn$;
COMMENT ON FUNCTION rag._log_payload(rag.ask_log) IS 'Internal: the text a log entry''s hash covers.';

-- Before insert: position in the tenant's chain (seq), previous hash and this entry's hash.
-- The per-tenant advisory lock orders concurrent askers; (tenant, seq) is unique besides.
CREATE OR REPLACE FUNCTION rag._ask_log_chain()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    last rag.ask_log;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('rag.ask_log:' || NEW.tenant, 7411));
    SELECT l.* INTO last FROM rag.ask_log AS l WHERE l.tenant = NEW.tenant ORDER BY l.seq DESC LIMIT 1;
    NEW.seq := coalesce(last.seq, 0) + 1;
    NEW.prev_hash := last.row_hash;
    NEW.role_name := current_user;
    NEW.row_hash := pg_catalog.sha256(
        coalesce(NEW.prev_hash, ''::bytea) || pg_catalog.convert_to(rag._log_payload(NEW), 'UTF8'));
    RETURN NEW;
END
$fn$;

DROP TRIGGER IF EXISTS ask_log_chain ON rag.ask_log;
CREATE TRIGGER ask_log_chain BEFORE INSERT ON rag.ask_log
FOR EACH ROW EXECUTE FUNCTION rag._ask_log_chain();

CREATE OR REPLACE FUNCTION rag.verify_log(tenant text)
RETURNS TABLE (ok boolean, checked bigint, first_bad_ask_id bigint, problem text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    l rag.ask_log;
    prev bytea;
    expected_seq bigint := 1;
BEGIN
    PERFORM rag._require_tenant(verify_log.tenant);
    checked := 0;
    FOR l IN SELECT * FROM rag.ask_log AS a WHERE a.tenant = verify_log.tenant ORDER BY a.seq LOOP
        IF l.seq <> expected_seq THEN
            problem := pg_catalog.format('entry seq %s missing', expected_seq);
        ELSIF l.prev_hash IS DISTINCT FROM prev THEN
            problem := 'prev_hash does not match the previous entry';
        ELSIF l.row_hash <> pg_catalog.sha256(
            coalesce(l.prev_hash, ''::bytea) || pg_catalog.convert_to(rag._log_payload(l), 'UTF8')) THEN
            problem := 'row_hash does not match the entry''s content';
        END IF;
        IF problem IS NOT NULL THEN
            ok := false;
            first_bad_ask_id := l.ask_id;
            RETURN NEXT;
            RETURN;
        END IF;
        prev := l.row_hash;
        expected_seq := expected_seq + 1;
        checked := checked + 1;
    END LOOP;
    ok := true;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag.verify_log(text) IS
'Walks a tenant''s audit log in order and recomputes every hash: ok, entries checked, and the first entry '
'whose content, order or link was altered.';

CREATE OR REPLACE FUNCTION rag.replay(ask bigint)
RETURNS TABLE (
    ask_id bigint, identical boolean, fingerprint_then text, fingerprint_now text,
    chunks_then bigint[], chunks_now bigint[], citations_identical boolean, status_then text, status_now text
)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    l rag.ask_log;
    s record;
    r record;
BEGIN
    SELECT a.* INTO l FROM rag.ask_log AS a WHERE a.ask_id = replay.ask;
    IF NOT found THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_object',
            MESSAGE = pg_catalog.format('ask %s not found', replay.ask),
            HINT = 'Only asks of tenants you are a member of can be replayed.';
    END IF;
    PERFORM rag._require_tenant(l.tenant);
    -- the settings of the original ask, for this transaction only
    FOR s IN SELECT e.key, e.value FROM pg_catalog.jsonb_each_text(l.settings) AS e LOOP
        PERFORM pg_catalog.set_config(s.key, s.value, true);
    END LOOP;
    replay.ask_id := l.ask_id;
    fingerprint_then := l.fingerprint;
    chunks_then := l.chunk_ids;
    status_then := l.status;
    IF l.query_embedding IS NULL THEN
        fingerprint_now := pg_catalog.encode(pg_catalog.sha256(''::bytea), 'hex');
        chunks_now := '{}';
        status_now := l.status;
        citations_identical := true;
    ELSE
        SELECT * INTO r FROM rag._answer(l.question, rag._correct_question(l.tenant, l.question), l.tenant, l.k,
            l.query_embedding, l.options);
        fingerprint_now := r.evidence ->> 'fingerprint';
        chunks_now := r.chunk_ids;
        status_now := r.status;
        citations_identical := r.citations = l.citations;
    END IF;
    identical := fingerprint_now = fingerprint_then AND chunks_now = chunks_then AND citations_identical
        AND status_now = status_then;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag.replay(bigint) IS
'Re-runs a logged ask with its logged embedding, parameters and settings and reports whether the retrieved '
'chunks, fingerprint, status and citations are identical (they are while the corpus is unchanged).';

CREATE OR REPLACE FUNCTION rag.explain(question text, tenant text, k integer DEFAULT 5)
RETURNS TABLE (
    fused_rank integer, chunk_id bigint, doc_key text, anchor text, title text,
    vec_rank integer, distance float8, fts_rank integer, fts_score float8, trgm_rank integer, trgm_score float8,
    fused_score float8, cited boolean, dropped_by text
)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p record;
    r record;
BEGIN
    p := rag._prepare_question(explain.question, explain.tenant, explain.k, NULL);
    IF NOT p.has_question THEN
        RETURN;
    END IF;
    SELECT * INTO r FROM rag._answer(explain.question, p.corrected, explain.tenant, explain.k, p.qemb, '{}');
    RETURN QUERY
    SELECT x.fused_rank, x.chunk_id, x.doc_key, c.anchor, c.title, x.vec_rank, x.distance, x.fts_rank,
        x.fts_score, x.trgm_rank, x.trgm_score, x.fused_score,
        EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(r.citations) AS e
                WHERE (e ->> 'chunk_id')::bigint = x.chunk_id),
        CASE
            WHEN x.fused_rank > explain.k THEN 'rank_beyond_k'
            WHEN r.status = 'abstained' THEN 'gate:' || r.reason || coalesce(' ' || (r.evidence -> 'gate' ->> 'failed'), '')
            WHEN EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(r.citations) AS e
                         WHERE (e ->> 'chunk_id')::bigint = x.chunk_id) THEN NULL
            ELSE 'not_quoted'
        END
    FROM rag._candidates(explain.tenant, p.corrected, p.qemb, greatest(explain.k * 4, 40)) AS x
    INNER JOIN rag.chunk AS c ON c.chunk_id = x.chunk_id
    ORDER BY x.fused_rank;
END
$fn$;
COMMENT ON FUNCTION rag.explain(text, text, integer) IS
'Every candidate of every retrieval leg with its rank and score per leg, the fused order, whether it was cited '
'and what dropped it (rank_beyond_k, gate:<reason>, not_quoted).';

GRANT EXECUTE ON FUNCTION rag.verify_log(text) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.replay(bigint) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.explain(text, text, integer) TO pgcite_reader;
