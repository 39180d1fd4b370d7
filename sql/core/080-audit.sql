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

-- What an entry's entry_hash covers (0.3.0 and later): every column but the chain's own (seq, prev_hash,
-- row_hash, entry_hash), so the entry can be hashed when it is written and chained later.
CREATE OR REPLACE FUNCTION rag._log_entry_text(l rag.ask_log)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.jsonb_build_object(
        'ask_id', l.ask_id, 'tenant', l.tenant, 'role_name', l.role_name,
        'asked_at', extract(EPOCH FROM l.asked_at), 'question', l.question, 'k', l.k, 'options', l.options,
        'settings', l.settings, 'model', l.model, 'query_embedding_supplied', l.query_embedding_supplied,
        'query_embedding', l.query_embedding::text, 'chunk_ids', l.chunk_ids, 'status', l.status,
        'reason', l.reason, 'answer', l.answer, 'citations', l.citations, 'evidence', l.evidence,
        'timings', l.timings, 'fingerprint', l.fingerprint
    )::text
$fn$;
COMMENT ON FUNCTION rag._log_entry_text(rag.ask_log) IS 'Internal: the text a log entry''s entry_hash covers.';

-- The hash that links an entry into its tenant's chain. Entries of 0.2.0 and earlier (entry_hash NULL)
-- hashed their content with their seq directly (rag._log_payload).
CREATE OR REPLACE FUNCTION rag._log_row_hash(l rag.ask_log)
RETURNS bytea
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE
        WHEN l.entry_hash IS NULL THEN pg_catalog.sha256(
            coalesce(l.prev_hash, ''::bytea) || pg_catalog.convert_to(rag._log_payload(l), 'UTF8'))
        ELSE pg_catalog.sha256(coalesce(l.prev_hash, ''::bytea) || pg_catalog.int8send(l.seq) || l.entry_hash)
    END
$fn$;
COMMENT ON FUNCTION rag._log_row_hash(rag.ask_log) IS
'Internal: sha256(prev_hash || seq || entry_hash), or the 0.2.0 formula for entries without entry_hash.';

-- Appends one entry, hashed but not yet chained, then seals the tenant's chain if it can do so without
-- waiting. Inserting never waits for another session, so an ask in an open transaction holds up nobody.
CREATE OR REPLACE FUNCTION rag._append_log(
    p_caller name, p_tenant text, p_asked_at timestamptz, p_question text, p_k integer, p_options jsonb,
    p_settings jsonb, p_model text, p_supplied boolean, p_qemb public.vector, p_chunk_ids bigint[], p_status text,
    p_reason text, p_answer text, p_citations jsonb, p_evidence jsonb, p_timings jsonb
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    l rag.ask_log;
BEGIN
    l.ask_id := pg_catalog.nextval('rag.ask_log_ask_id_seq');
    l.tenant := p_tenant;
    l.role_name := p_caller;
    l.asked_at := p_asked_at;
    l.question := p_question;
    l.k := p_k;
    l.options := p_options;
    l.settings := p_settings;
    l.model := p_model;
    l.query_embedding_supplied := p_supplied;
    l.query_embedding := p_qemb;
    l.chunk_ids := p_chunk_ids;
    l.status := p_status;
    l.reason := p_reason;
    l.answer := p_answer;
    l.citations := p_citations;
    l.evidence := p_evidence;
    l.timings := p_timings;
    l.fingerprint := p_evidence ->> 'fingerprint';
    l.entry_hash := pg_catalog.sha256(pg_catalog.convert_to(rag._log_entry_text(l), 'UTF8'));
    INSERT INTO rag.ask_log OVERRIDING SYSTEM VALUE SELECT l.*;
    PERFORM rag._seal_log(p_tenant);
    RETURN l.ask_id;
END
$fn$;
COMMENT ON FUNCTION rag._append_log(
    name, text, timestamptz, text, integer, jsonb, jsonb, text, boolean, public.vector, bigint[], text, text, text,
    jsonb, jsonb, jsonb
) IS 'Internal: writes one audit entry with its entry_hash and seals the chain when that needs no waiting.';

-- Seals the tenant's unsealed entries that this transaction can see, in ask_id order: each gets the next seq,
-- the previous row_hash and its own row_hash, and rag.log_head moves to the last. Only whoever holds the
-- tenant's rag.log_head row seals; a session that finds it locked skips (SKIP LOCKED), and so do read-only
-- transactions and REPEATABLE READ / SERIALIZABLE ones (their snapshot may not show the newest head). Returns
-- how many entries it sealed.
CREATE OR REPLACE FUNCTION rag._seal_log(p_tenant text)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    h rag.log_head;
    l record;
    n integer := 0;
    prev bytea;
    s bigint;
BEGIN
    IF pg_catalog.pg_is_in_recovery() OR pg_catalog.current_setting('transaction_read_only') = 'on'
        OR pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    SELECT * INTO h FROM rag.log_head AS x WHERE x.tenant = p_tenant FOR UPDATE SKIP LOCKED;
    IF NOT found THEN
        RETURN 0;
    END IF;
    prev := h.row_hash;
    s := h.seq;
    FOR l IN
        SELECT a.ask_id, a.entry_hash FROM rag.ask_log AS a
        WHERE a.tenant = p_tenant AND a.seq IS NULL
        ORDER BY a.ask_id
    LOOP
        s := s + 1;
        UPDATE rag.ask_log AS a
        SET seq = s, prev_hash = prev,
            row_hash = pg_catalog.sha256(coalesce(prev, ''::bytea) || pg_catalog.int8send(s) || l.entry_hash)
        WHERE a.ask_id = l.ask_id
        RETURNING a.row_hash INTO prev;
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        UPDATE rag.log_head AS x SET seq = s, row_hash = prev, sealed_at = pg_catalog.now()
        WHERE x.tenant = p_tenant;
    END IF;
    RETURN n;
END
$fn$;
COMMENT ON FUNCTION rag._seal_log(text) IS
'Internal: chains the tenant''s unsealed log entries (never waits: SKIP LOCKED on rag.log_head); how many.';

CREATE OR REPLACE FUNCTION rag._verify_log(p_caller name, p_tenant text)
RETURNS TABLE (ok boolean, checked bigint, first_bad_ask_id bigint, problem text, unsealed bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    l rag.ask_log;
    h rag.log_head;
    prev bytea;
    expected_seq bigint := 1;
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'read');
    PERFORM rag._seal_log(p_tenant);
    checked := 0;
    FOR l IN SELECT * FROM rag.ask_log AS a WHERE a.tenant = p_tenant AND a.seq IS NOT NULL ORDER BY a.seq LOOP
        IF l.seq <> expected_seq THEN
            problem := pg_catalog.format('entry seq %s missing', expected_seq);
        ELSIF l.prev_hash IS DISTINCT FROM prev THEN
            problem := 'prev_hash does not match the previous entry';
        ELSIF l.entry_hash IS NOT NULL
            AND l.entry_hash <> pg_catalog.sha256(pg_catalog.convert_to(rag._log_entry_text(l), 'UTF8')) THEN
            problem := 'entry_hash does not match the entry''s content';
        ELSIF l.row_hash IS DISTINCT FROM rag._log_row_hash(l) THEN
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
    -- the head, kept outside the log: deleting the log's last entries (or all of them) leaves it ahead
    SELECT * INTO h FROM rag.log_head AS x WHERE x.tenant = p_tenant;
    IF NOT found AND checked > 0 THEN
        problem := 'the log head of this tenant is missing';
    ELSIF found AND h.seq <> checked THEN
        problem := pg_catalog.format('the log head is at seq %s but the log ends at seq %s: entries were removed',
            h.seq, checked);
    ELSIF found AND h.row_hash IS DISTINCT FROM prev THEN
        problem := 'the last entry''s row_hash differs from the log head';
    END IF;
    -- entries not yet chained must still match their own hash
    SELECT min(a.ask_id), count(*) INTO first_bad_ask_id, unsealed FROM rag.ask_log AS a
    WHERE a.tenant = p_tenant AND a.seq IS NULL;
    IF problem IS NULL AND first_bad_ask_id IS NOT NULL THEN
        SELECT min(a.ask_id) INTO first_bad_ask_id FROM rag.ask_log AS a
        WHERE a.tenant = p_tenant AND a.seq IS NULL
            AND a.entry_hash IS DISTINCT FROM pg_catalog.sha256(pg_catalog.convert_to(rag._log_entry_text(a), 'UTF8'));
        IF first_bad_ask_id IS NOT NULL THEN
            problem := 'an unsealed entry''s entry_hash does not match its content';
        END IF;
    ELSE
        first_bad_ask_id := NULL;
    END IF;
    ok := problem IS NULL;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag._verify_log(name, text) IS
'Internal (SECURITY DEFINER: seals the chain): rag.verify_log for the checked caller.';

CREATE OR REPLACE FUNCTION rag.verify_log(tenant text)
RETURNS TABLE (ok boolean, checked bigint, first_bad_ask_id bigint, problem text, unsealed bigint)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._verify_log(current_user, verify_log.tenant)
$fn$;
COMMENT ON FUNCTION rag.verify_log(text) IS
'Seals what it can, then walks a tenant''s audit log in order and recomputes every hash: ok, entries checked, '
'the first entry whose content, order or link was altered, and entries not yet sealed. Entries removed from the '
'end are detected against rag.log_head.';

CREATE OR REPLACE FUNCTION rag._log_head(p_caller name, p_tenant text)
RETURNS TABLE (tenant text, seq bigint, row_hash text, sealed_at timestamptz, unsealed bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'admin');
    PERFORM rag._seal_log(p_tenant);
    RETURN QUERY
    SELECT h.tenant, h.seq, pg_catalog.encode(h.row_hash, 'hex'), h.sealed_at,
        (SELECT count(*) FROM rag.ask_log AS a WHERE a.tenant = p_tenant AND a.seq IS NULL)
    FROM rag.log_head AS h WHERE h.tenant = p_tenant;
END
$fn$;
COMMENT ON FUNCTION rag._log_head(name, text) IS
'Internal (SECURITY DEFINER: seals the chain): rag.log_head for the checked caller.';

CREATE OR REPLACE FUNCTION rag.log_head(tenant text)
RETURNS TABLE (tenant text, seq bigint, row_hash text, sealed_at timestamptz, unsealed bigint)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._log_head(current_user, log_head.tenant)
$fn$;
COMMENT ON FUNCTION rag.log_head(text) IS
'The head of a tenant''s audit chain after sealing: last seq and its row_hash (hex). Record it outside the '
'database (as transparency logs publish their tree heads): a log rewritten from the start is detected only '
'against such a record. Needs pgcite_admin.';

-- The answer-shaping settings of a logged ask, to replay with: the numeric settings of rag._settings_catalog
-- that shape an answer, each within its bounds, over the defaults. Nothing that chooses code or a model is
-- ever taken from a log row (0.2.0 rows logged "pgcite.<name>" keys; both spellings are read).
CREATE OR REPLACE FUNCTION rag._logged_params(p_settings jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.jsonb_object_agg(c.name, coalesce(
        (SELECT v.n FROM (
            SELECT CASE WHEN x.value ~ '^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$' THEN x.value::float8 END AS n
            FROM pg_catalog.jsonb_each_text(coalesce(p_settings, '{}')) AS x
            WHERE x.key IN (c.name, 'pgcite.' || c.name)
        ) AS v WHERE v.n BETWEEN c.min_value AND c.max_value LIMIT 1),
        c.default_value::float8))
    FROM rag._settings_catalog() AS c
    WHERE c.in_answer
$fn$;
COMMENT ON FUNCTION rag._logged_params(jsonb) IS
'Internal: the answer-shaping numeric settings of a log row (valid ones only, else defaults).';

-- A generated answer checked again (rag.replay): the reply that decided it, checked by rag._enforce_reply
-- against the chunks retrieved today, numbered as today. No model is called. {checked, status, reason, citations,
-- citations_verify, rejected (numbers and why), unsupported_sentences}; checked false when there is no reply (the
-- generator was not called or was unavailable).
CREATE OR REPLACE FUNCTION rag._recheck_generation(
    l rag.ask_log, p_chunk_ids bigint[], p_gate_passed boolean, p_min_support float8
)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    g jsonb := l.evidence -> 'generation';
    last_reply jsonb;
    e jsonb;
BEGIN
    SELECT a.value -> 'raw' INTO last_reply
    FROM pg_catalog.jsonb_array_elements(coalesce(g -> 'attempts', '[]')) WITH ORDINALITY AS a (value, o)
    ORDER BY a.o DESC LIMIT 1;
    IF NOT coalesce((g ->> 'called')::boolean, false) OR last_reply IS NULL
        OR pg_catalog.jsonb_typeof(last_reply) = 'null' THEN
        RETURN pg_catalog.jsonb_build_object('checked', false,
            'why', CASE WHEN coalesce((g ->> 'called')::boolean, false) THEN 'the generator gave no reply'
                ELSE 'the generator was not called' END,
            'status', CASE WHEN coalesce((g ->> 'called')::boolean, false) THEN l.status END,
            'citations', l.citations);
    END IF;
    e := rag._enforce_reply(rag._generation_sources(p_chunk_ids), last_reply, p_min_support);
    RETURN pg_catalog.jsonb_build_object('checked', true,
        'status', CASE WHEN NOT p_gate_passed THEN 'abstained' ELSE e ->> 'status' END,
        'reason', CASE WHEN NOT p_gate_passed THEN 'no_relevant_sources' ELSE e ->> 'reason' END,
        'citations', CASE WHEN p_gate_passed AND (e ->> 'ok')::boolean THEN coalesce(e -> 'citations', '[]')
            ELSE '[]' END,
        'citations_verify', CASE WHEN l.status = 'answered'
            THEN (e ->> 'ok')::boolean AND coalesce(e -> 'citations', '[]') = l.citations END,
        'rejected', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('n', x -> 'n', 'why', x -> 'why'))
            FROM pg_catalog.jsonb_array_elements(e -> 'rejected') AS x),
        'unsupported_sentences', (SELECT pg_catalog.jsonb_agg(x -> 'i')
            FROM pg_catalog.jsonb_array_elements(e -> 'claims') AS x WHERE NOT (x ->> 'supported')::boolean));
END
$fn$;
COMMENT ON FUNCTION rag._recheck_generation(rag.ask_log, bigint[], boolean, float8) IS
'Internal: the stored reply of a generated answer checked again against today''s chunks (rag.replay).';

CREATE OR REPLACE FUNCTION rag._replay(p_caller name, p_ask bigint)
RETURNS TABLE (
    ask_id bigint, identical boolean, fingerprint_then text, fingerprint_now text,
    chunks_then bigint[], chunks_now bigint[], citations_identical boolean, status_then text, status_now text,
    citations_verify boolean, recheck jsonb
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    who regrole := rag._caller(p_caller);
    l rag.ask_log;
    params jsonb;
    r record;
BEGIN
    SELECT a.* INTO l FROM rag.ask_log AS a WHERE a.ask_id = p_ask;
    IF NOT found OR NOT (pg_catalog.pg_has_role(who, 'pgcite_reader', 'MEMBER') OR rag._is_admin(who))
        OR NOT rag._is_member(who, l.tenant) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_object',
            MESSAGE = pg_catalog.format('ask %s not found', p_ask),
            HINT = 'Only asks of tenants you are a member of can be replayed.';
    END IF;
    params := rag._logged_params(l.settings);
    _replay.ask_id := l.ask_id;
    fingerprint_then := l.fingerprint;
    chunks_then := l.chunk_ids;
    status_then := l.status;
    IF l.query_embedding IS NULL THEN
        fingerprint_now := pg_catalog.encode(pg_catalog.sha256(''::bytea), 'hex');
        chunks_now := '{}';
        status_now := l.status;
        citations_identical := true;
    ELSE
        SELECT * INTO r FROM rag._answer(l.question, rag._correct_question(l.tenant, l.question, params), l.tenant,
            l.k, l.query_embedding, l.options - 'generator', params);
        fingerprint_now := r.evidence ->> 'fingerprint';
        chunks_now := r.chunk_ids;
        status_now := r.status;
        citations_identical := r.citations = l.citations;
        IF l.evidence ? 'generation' THEN
            -- a generated answer: its stored reply is checked again against today's chunks (no model is called)
            recheck := rag._recheck_generation(l, r.chunk_ids, (r.evidence #>> '{gate,passed}')::boolean,
                (params ->> 'min_support')::float8);
            status_now := coalesce(recheck ->> 'status', status_now);
            citations_identical := coalesce(recheck -> 'citations', '[]'::jsonb) = l.citations;
            citations_verify := (recheck ->> 'citations_verify')::boolean;
        END IF;
    END IF;
    identical := fingerprint_now = fingerprint_then AND chunks_now = chunks_then AND citations_identical
        AND status_now = status_then;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag._replay(name, bigint) IS
'Internal (SECURITY DEFINER: reads the log and embeddings of the caller''s tenant): rag.replay for the checked '
'caller.';

CREATE OR REPLACE FUNCTION rag.replay(ask bigint)
RETURNS TABLE (
    ask_id bigint, identical boolean, fingerprint_then text, fingerprint_now text,
    chunks_then bigint[], chunks_now bigint[], citations_identical boolean, status_then text, status_now text,
    citations_verify boolean, recheck jsonb
)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._replay(current_user, replay.ask)
$fn$;
COMMENT ON FUNCTION rag.replay(bigint) IS
'Re-runs a logged ask with its logged embedding, parameters and answer-shaping settings (numbers only: never a '
'model or a path) and reports whether the retrieved chunks, fingerprint, status and citations are identical '
'(they are while the corpus is unchanged). A generated answer''s stored reply is checked again against today''s '
'chunks without calling the model: citations_verify says whether its citations still verify, recheck has the '
'details (NULL for extractive answers).';

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
    FROM rag._candidates(p_tenant, p.corrected, p.qemb, greatest(p_k * 4, 40), params) AS x
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
    SELECT * FROM rag._explain(current_user, explain.question, explain.tenant, explain.k, explain.query_embedding)
$fn$;
COMMENT ON FUNCTION rag.explain(text, text, integer, public.vector) IS
'Every candidate of every retrieval leg with its rank and score per leg, the fused order, whether it was cited '
'and what dropped it (rank_beyond_k, gate:<reason>, not_quoted). query_embedding as for rag.ask (needed '
'where pgcite_python is not installed).';

GRANT EXECUTE ON FUNCTION rag.verify_log(text) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.replay(bigint) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.explain(text, text, integer, public.vector) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.log_head(text) TO pgcite_admin;
