-- Audit: the hash chain of rag.ask_log, its check (rag.verify_log) and its head (rag.log_head).

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
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- PL/pgSQL: a sql function with SET is planned again on every call (once per rag.ask)
    RETURN pg_catalog.jsonb_build_object(
        'ask_id', l.ask_id, 'tenant', l.tenant, 'role_name', l.role_name,
        'asked_at', extract(EPOCH FROM l.asked_at), 'question', l.question, 'k', l.k, 'options', l.options,
        'settings', l.settings, 'model', l.model, 'query_embedding_supplied', l.query_embedding_supplied,
        'query_embedding', l.query_embedding::text, 'chunk_ids', l.chunk_ids, 'status', l.status,
        'reason', l.reason, 'answer', l.answer, 'citations', l.citations, 'evidence', l.evidence,
        'timings', l.timings, 'fingerprint', l.fingerprint
    )::text;
END
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

-- Appends one entry, hashed, and chains it if it can do so without waiting. Inserting never waits for another
-- session, so an ask in an open transaction holds up nobody. When this transaction may seal (rag._seal_log's
-- conditions), holds the tenant's rag.log_head row (SKIP LOCKED) and sees no unsealed entry of the tenant, the
-- entry is inserted chained: the seq, prev_hash and row_hash that inserting it unchained and then running
-- rag._seal_log would give it, without writing the row twice (the UPDATE of a new row: a second heap tuple, its
-- index entries and its WAL, and a dead tuple left in rag.ask_log). Otherwise it is inserted unchained and
-- rag._seal_log chains what it can, as before.
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
    h rag.log_head;
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
    IF NOT (pg_catalog.pg_is_in_recovery() OR pg_catalog.current_setting('transaction_read_only') = 'on'
        OR pg_catalog.current_setting('transaction_isolation') <> 'read committed') THEN
        SELECT * INTO h FROM rag.log_head AS x WHERE x.tenant = p_tenant FOR UPDATE SKIP LOCKED;
        IF found AND NOT EXISTS (SELECT FROM rag.ask_log AS a WHERE a.tenant = p_tenant AND a.seq IS NULL) THEN
            l.seq := h.seq + 1;
            l.prev_hash := h.row_hash;
            l.row_hash := pg_catalog.sha256(coalesce(h.row_hash, ''::bytea) || pg_catalog.int8send(l.seq)
                || l.entry_hash);
            INSERT INTO rag.ask_log OVERRIDING SYSTEM VALUE SELECT l.*;
            UPDATE rag.log_head AS x SET seq = l.seq, row_hash = l.row_hash, sealed_at = pg_catalog.now()
            WHERE x.tenant = p_tenant;
            RETURN l.ask_id;
        END IF;
    END IF;
    INSERT INTO rag.ask_log OVERRIDING SYSTEM VALUE SELECT l.*;
    PERFORM rag._seal_log(p_tenant);
    RETURN l.ask_id;
END
$fn$;
COMMENT ON FUNCTION rag._append_log(
    name, text, timestamptz, text, integer, jsonb, jsonb, text, boolean, public.vector, bigint[], text, text, text,
    jsonb, jsonb, jsonb
) IS 'Internal: writes one audit entry with its entry_hash, chained at once when that needs no waiting and no '
'earlier entry waits, else sealed by rag._seal_log when that needs no waiting.';

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
    r record;
    head_found boolean;
    head_seq bigint;
    head_hash bytea;
    bad_unsealed bigint;
    first_unsealed bigint;
    prev bytea;
    expected_seq bigint;
    walked boolean;
    tries integer := 0;
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'read');
    PERFORM rag._seal_log(p_tenant);
    -- The walk, the head and the unsealed entries are read in one statement, so in one snapshot: read by later
    -- statements (before 0.8.0), an entry that another member's rag.ask sealed and committed during the walk
    -- put the head ahead of the walk, "entries were removed" (when this call's own sealing found the head
    -- locked by that ask). The head and the unsealed entries are the query's InitPlans (uncorrelated scalar
    -- subqueries: evaluated once, in the query's snapshot).
    <<attempt>>
    LOOP
        tries := tries + 1;
        checked := 0;
        problem := NULL;
        prev := NULL;
        expected_seq := 1;
        walked := false;
        FOR r IN
            SELECT a AS entry,
                EXISTS (SELECT FROM rag.log_head AS x WHERE x.tenant = p_tenant) AS head_found,
                (SELECT x.seq FROM rag.log_head AS x WHERE x.tenant = p_tenant) AS head_seq,
                (SELECT x.row_hash FROM rag.log_head AS x WHERE x.tenant = p_tenant) AS head_hash,
                (SELECT pg_catalog.count(*) FROM rag.ask_log AS u WHERE u.tenant = p_tenant AND u.seq IS NULL)
                    AS unsealed,
                (SELECT min(u.ask_id) FROM rag.ask_log AS u WHERE u.tenant = p_tenant AND u.seq IS NULL)
                    AS first_unsealed,
                (SELECT min(u.ask_id) FROM rag.ask_log AS u WHERE u.tenant = p_tenant AND u.seq IS NULL
                    AND u.entry_hash IS DISTINCT FROM
                        pg_catalog.sha256(pg_catalog.convert_to(rag._log_entry_text(u), 'UTF8'))) AS bad_unsealed
            FROM rag.ask_log AS a WHERE a.tenant = p_tenant AND a.seq IS NOT NULL ORDER BY a.seq
        LOOP
            IF NOT walked THEN
                walked := true;
                head_found := r.head_found;
                head_seq := r.head_seq;
                head_hash := r.head_hash;
                unsealed := r.unsealed;
                first_unsealed := r.first_unsealed;
                bad_unsealed := r.bad_unsealed;
            END IF;
            l := r.entry;
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
                unsealed := r.unsealed;
                RETURN NEXT;
                RETURN;
            END IF;
            prev := l.row_hash;
            expected_seq := expected_seq + 1;
            checked := checked + 1;
        END LOOP;
        EXIT attempt WHEN walked;
        -- no sealed entry: the head and the unsealed entries in one snapshot, with the sealed ones counted in
        -- it; when some were sealed since the walk's snapshot (a first ask of the tenant), walk again
        SELECT EXISTS (SELECT FROM rag.log_head AS x WHERE x.tenant = p_tenant),
            (SELECT x.seq FROM rag.log_head AS x WHERE x.tenant = p_tenant),
            (SELECT x.row_hash FROM rag.log_head AS x WHERE x.tenant = p_tenant),
            (SELECT pg_catalog.count(*) FROM rag.ask_log AS u WHERE u.tenant = p_tenant AND u.seq IS NULL),
            (SELECT min(u.ask_id) FROM rag.ask_log AS u WHERE u.tenant = p_tenant AND u.seq IS NULL),
            (SELECT min(u.ask_id) FROM rag.ask_log AS u WHERE u.tenant = p_tenant AND u.seq IS NULL
                AND u.entry_hash IS DISTINCT FROM
                    pg_catalog.sha256(pg_catalog.convert_to(rag._log_entry_text(u), 'UTF8'))),
            EXISTS (SELECT FROM rag.ask_log AS a WHERE a.tenant = p_tenant AND a.seq IS NOT NULL)
        INTO head_found, head_seq, head_hash, unsealed, first_unsealed, bad_unsealed, walked;
        EXIT attempt WHEN NOT walked OR tries >= 3;
    END LOOP;
    -- the head, kept outside the log: deleting the log's last entries (or all of them) leaves it ahead
    IF NOT head_found AND checked > 0 THEN
        problem := 'the log head of this tenant is missing';
    ELSIF head_found AND head_seq <> checked THEN
        problem := pg_catalog.format('the log head is at seq %s but the log ends at seq %s: entries were removed',
            head_seq, checked);
    ELSIF head_found AND head_hash IS DISTINCT FROM prev THEN
        problem := 'the last entry''s row_hash differs from the log head';
    END IF;
    -- entries not yet chained must still match their own hash
    first_bad_ask_id := NULL;
    IF problem IS NULL AND first_unsealed IS NOT NULL AND bad_unsealed IS NOT NULL THEN
        first_bad_ask_id := bad_unsealed;
        problem := 'an unsealed entry''s entry_hash does not match its content';
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

GRANT EXECUTE ON FUNCTION rag.verify_log(text) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.log_head(text) TO pgcite_admin;
