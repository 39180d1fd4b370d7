-- Generated answers, 2 of 3: a generator's reply checked against the sources of its call. Unknown numbers
-- and unverifiable quotes are removed (rag.verify finds the quotes), every sentence must carry a marker whose
-- quotes support it (rag._support_scores).

-- A reply as a CitedAnswer: {value, errors}. The reply is a JSON object, or a JSON string holding the model's
-- raw text (a Markdown code fence around the object is tolerated). The rules are the schema's
-- (rag._cited_answer_schema), plus: a non-empty answer unless abstain is true.
CREATE OR REPLACE FUNCTION rag._parse_reply(p_reply jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v jsonb := p_reply;
    txt text;
    fenced text [];
    errors text [] := '{}';
    c record;
    extra text;
BEGIN
    IF v IS NULL OR pg_catalog.jsonb_typeof(v) = 'null' THEN
        RETURN pg_catalog.jsonb_build_object('value', NULL,
            'errors', pg_catalog.jsonb_build_array('The reply is empty.'));
    END IF;
    -- Bounded work (docs/security.md): checking a reply costs about its sentences times its citations, so a
    -- reply of a few hundred kB of repeated sentences and citations (rag.answer takes any caller's) kept a core
    -- busy for hours and built gigabytes. Limits far above any real answer, checked before anything else.
    IF pg_catalog.octet_length(v::text) > 262144 THEN
        RETURN pg_catalog.jsonb_build_object('value', NULL, 'errors', pg_catalog.jsonb_build_array(
            pg_catalog.format('The reply is %s bytes long; at most 262144.', pg_catalog.octet_length(v::text))));
    END IF;
    IF pg_catalog.jsonb_typeof(v) = 'string' THEN
        txt := pg_catalog.btrim(v #>> '{}', E' \t\n\r');
        fenced := pg_catalog.regexp_match(txt, '^```[A-Za-z]*\s*(.*?)\s*```$');
        IF fenced IS NOT NULL THEN
            txt := fenced[1];
        END IF;
        BEGIN
            v := txt::jsonb;
        EXCEPTION WHEN invalid_text_representation OR invalid_parameter_value THEN
            RETURN pg_catalog.jsonb_build_object('value', NULL, 'errors', pg_catalog.jsonb_build_array(
                pg_catalog.format('The reply is not valid JSON (%s).', pg_catalog.left(SQLERRM, 200))));
        END;
    END IF;
    IF pg_catalog.jsonb_typeof(v) <> 'object' THEN
        RETURN pg_catalog.jsonb_build_object('value', NULL, 'errors', pg_catalog.jsonb_build_array(
            pg_catalog.format('The reply must be a JSON object, not %s.', pg_catalog.jsonb_typeof(v))));
    END IF;
    FOR extra IN SELECT k.key FROM pg_catalog.jsonb_object_keys(v) AS k (key)
        WHERE k.key NOT IN ('answer', 'citations', 'abstain', 'abstain_reason') ORDER BY k.key LOOP
        errors := errors || pg_catalog.format('Unknown key "%s": the keys are answer, citations, abstain and '
            'abstain_reason.', pg_catalog.left(extra, 60));
    END LOOP;
    IF pg_catalog.jsonb_typeof(v -> 'abstain') IS DISTINCT FROM 'boolean' THEN
        errors := errors || 'abstain must be true or false.'::text;
    END IF;
    IF NOT v ? 'answer' OR pg_catalog.jsonb_typeof(v -> 'answer') NOT IN ('string', 'null') THEN
        errors := errors || 'answer must be a string (or null when abstaining).'::text;
    ELSIF v -> 'abstain' = 'false'::jsonb AND coalesce(pg_catalog.btrim(v ->> 'answer'), '') = '' THEN
        errors := errors || 'answer must not be empty unless abstain is true.'::text;
    END IF;
    IF v ? 'abstain_reason' AND pg_catalog.jsonb_typeof(v -> 'abstain_reason') NOT IN ('string', 'null') THEN
        errors := errors || 'abstain_reason must be a string or null.'::text;
    END IF;
    IF pg_catalog.jsonb_typeof(v -> 'answer') = 'string' AND pg_catalog.length(v ->> 'answer') > 10000 THEN
        errors := errors || pg_catalog.format('The answer is %s characters long; at most 10000.',
            pg_catalog.length(v ->> 'answer'));
    ELSIF pg_catalog.jsonb_typeof(v -> 'answer') = 'string'
        AND (SELECT pg_catalog.count(*) FROM rag._answer_claims(v ->> 'answer') AS x) > 100 THEN
        errors := errors || 'The answer has more than 100 sentences; at most 100.'::text;
    END IF;
    IF pg_catalog.jsonb_typeof(v -> 'citations') IS DISTINCT FROM 'array' THEN
        errors := errors || 'citations must be an array of {"n": <source number>, "quote": "..."}.'::text;
    ELSIF pg_catalog.jsonb_array_length(v -> 'citations') > 50 THEN
        errors := errors || pg_catalog.format('citations has %s entries; at most 50.',
            pg_catalog.jsonb_array_length(v -> 'citations'));
    ELSE
        FOR c IN SELECT e.value, e.o - 1 AS i FROM pg_catalog.jsonb_array_elements(v -> 'citations')
            WITH ORDINALITY AS e (value, o) LOOP
            IF pg_catalog.jsonb_typeof(c.value) <> 'object' THEN
                errors := errors || pg_catalog.format('citations[%s] must be an object {"n": ..., "quote": ...}.', c.i);
                CONTINUE;
            END IF;
            FOR extra IN SELECT k.key FROM pg_catalog.jsonb_object_keys(c.value) AS k (key)
                WHERE k.key NOT IN ('n', 'quote') ORDER BY k.key LOOP
                errors := errors || pg_catalog.format('citations[%s] has an unknown key "%s": a citation is '
                    '{"n": <source number>, "quote": "..."} and nothing else.', c.i, pg_catalog.left(extra, 60));
            END LOOP;
            IF pg_catalog.jsonb_typeof(c.value -> 'n') IS DISTINCT FROM 'number'
                OR (c.value ->> 'n') !~ '^[0-9]{1,9}$' OR (c.value ->> 'n')::integer < 1 THEN
                errors := errors || pg_catalog.format('citations[%s].n must be a whole number of at least 1.', c.i);
            END IF;
            IF pg_catalog.jsonb_typeof(c.value -> 'quote') IS DISTINCT FROM 'string' THEN
                errors := errors || pg_catalog.format('citations[%s].quote must be a string.', c.i);
            END IF;
        END LOOP;
    END IF;
    IF errors <> '{}' THEN
        RETURN pg_catalog.jsonb_build_object('value', NULL, 'errors', pg_catalog.to_jsonb(errors));
    END IF;
    RETURN pg_catalog.jsonb_build_object('value', v, 'errors', '[]'::jsonb);
END
$fn$;
COMMENT ON FUNCTION rag._parse_reply(jsonb) IS
'Internal: a generator''s reply (a JSON object, or a JSON string of raw text) checked against the CitedAnswer '
'schema: {value, errors}.';

-- Markers as [n]: "[1, 2]" and "[1][2]" become "[1] [2]" (what rag.verify and the sentence check read).
CREATE OR REPLACE FUNCTION rag._normalize_markers(p_answer text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t text := coalesce(p_answer, '');
    -- a list of markers "[1, 2; 3" (up to its last number); each one's separators become "] [". One pass over
    -- the text (a loop of regexp_replace until nothing changed took a pass per number: quadratic)
    list text := '\[[0-9]{1,6}(\s*[,;]\s*[0-9]{1,6})+';
    out text := '';
    pos integer := 1;
    at integer;
    found text;
BEGIN
    LOOP
        at := pg_catalog.regexp_instr(t, list, pos);
        EXIT WHEN at = 0;
        found := pg_catalog.regexp_substr(t, list, at);
        out := out || pg_catalog.substr(t, pos, at - pos)
            || pg_catalog.regexp_replace(found, '\s*[,;]\s*', '] [', 'g');
        pos := at + pg_catalog.length(found);
    END LOOP;
    RETURN pg_catalog.regexp_replace(out || pg_catalog.substr(t, pos), '\]\[', '] [', 'g');
END
$fn$;
COMMENT ON FUNCTION rag._normalize_markers(text) IS 'Internal: citation markers of an answer written as [n] each.';

-- The sentences of an answer and the source numbers each carries. "[1, 2]" and "[1][2]" count as [1] [2]; a
-- marker right after a sentence's end ("... wraparound. [1]") belongs to that sentence. Sentences end at . ! ?
-- before white space and a character that is not a lower-case letter (so "e.g. the" does not split), and at
-- line breaks.
CREATE OR REPLACE FUNCTION rag._answer_claims(p_answer text)
RETURNS TABLE (i integer, sentence text, markers integer[])
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t text := rag._normalize_markers(p_answer);
BEGIN
    t := pg_catalog.regexp_replace(t, '([.!?])((\s*\[[0-9]{1,6}\])+)', '\2\1', 'g');
    -- abbreviations whose dot ends no sentence
    t := pg_catalog.regexp_replace(t, '\m(e\.g|i\.e|etc|vs|cf|approx|incl|resp|Fig|fig|Sec|sec)\.',
        '\1' || pg_catalog.chr(1), 'g');
    RETURN QUERY
    SELECT (pg_catalog.row_number() OVER (ORDER BY s.o))::integer,
        pg_catalog.btrim(pg_catalog.regexp_replace(pg_catalog.replace(
            pg_catalog.regexp_replace(s.piece, '\s*\[[0-9]{1,6}\]', '', 'g'), pg_catalog.chr(1), '.'),
            '\s+', ' ', 'g')),
        coalesce((SELECT pg_catalog.array_agg(DISTINCT m.a[1]::integer)
            FROM pg_catalog.regexp_matches(s.piece, '\[([0-9]{1,6})\]', 'g') AS m (a)), '{}')
    FROM pg_catalog.regexp_split_to_table(t, '(?<=[.!?])\s+(?=[^a-z[:space:]])|\s*\n\s*')
        WITH ORDINALITY AS s (piece, o)
    -- a piece with nothing but markers and punctuation is no sentence
    WHERE pg_catalog.regexp_replace(s.piece, '\[[0-9]{1,6}\]', '', 'g') ~ '[[:alnum:]]';
END
$fn$;
COMMENT ON FUNCTION rag._answer_claims(text) IS
'Internal: the sentences of a generated answer (markers removed) with the source numbers each one carries.';

-- How well each sentence is supported by its quotes: [{sentence, quotes, quote_vectors}] -> [{lexical,
-- similarity, missing, score, supported}] in the same order (quote_vectors: the stored embeddings of quotes that
-- are whole sentences of their source, or nulls; they spare the model that work). The one place to change for a
-- better judge (an NLI cross-encoder would replace rag._support_similarity, see docs/generation.md):
-- * lexical: the share of the sentence's content words (rag._content_terms) found in its quotes;
-- * similarity: MiniLM cosine of the sentence with its best quote (or all its quotes together), from
--   rag._support_similarity when pgcite_python is installed, else NULL;
-- * missing: numbers and snake_case names of the sentence that its quotes do not contain (each must);
-- * score: the mean of lexical and similarity (lexical alone without pgcite_python); supported when the score
--   reaches the setting min_support and nothing is missing.
CREATE OR REPLACE FUNCTION rag._support_scores(p_claims jsonb, p_min_support float8)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    sims jsonb;
    c record;
    s_terms text [];
    q_terms text [];
    all_quotes text;
    lexical float8;
    similarity float8;
    score float8;
    missing text [];
    out_scores jsonb := '[]';
BEGIN
    IF coalesce(pg_catalog.jsonb_array_length(p_claims), 0) = 0 THEN
        RETURN '[]';
    END IF;
    IF pg_catalog.to_regprocedure('rag._support_similarity(jsonb)') IS NOT NULL THEN
        EXECUTE 'SELECT rag._support_similarity($1)' INTO sims USING p_claims;
    END IF;
    FOR c IN SELECT e.value, e.o FROM pg_catalog.jsonb_array_elements(p_claims) WITH ORDINALITY AS e (value, o) LOOP
        SELECT coalesce(pg_catalog.string_agg(q.value #>> '{}', ' '), '') INTO all_quotes
        FROM pg_catalog.jsonb_array_elements(c.value -> 'quotes') AS q;
        s_terms := rag._content_terms(c.value ->> 'sentence');
        q_terms := rag._content_terms(all_quotes);
        lexical := CASE WHEN pg_catalog.cardinality(s_terms) = 0 THEN 1 ELSE
            (SELECT count(*) FROM pg_catalog.unnest(s_terms) AS u (term) WHERE u.term = ANY (q_terms))::float8
            / pg_catalog.cardinality(s_terms) END;
        SELECT coalesce(pg_catalog.array_agg(DISTINCT w.a[1] ORDER BY w.a[1]), '{}') INTO missing
        FROM pg_catalog.regexp_matches(c.value ->> 'sentence',
            '([0-9]+(?:[.,][0-9]+)*|[[:alnum:]]+_[[:alnum:]_]*)', 'g') AS w (a)
        WHERE pg_catalog.strpos(pg_catalog.lower(all_quotes), pg_catalog.lower(w.a[1])) = 0;
        similarity := (sims ->> (c.o - 1)::integer)::float8;
        score := CASE WHEN similarity IS NULL THEN lexical ELSE (lexical + similarity) / 2 END;
        out_scores := out_scores || pg_catalog.jsonb_build_object(
            'lexical', round(lexical::numeric, 4), 'similarity', round(similarity::numeric, 4),
            'missing', pg_catalog.to_jsonb(missing), 'score', round(score::numeric, 4),
            'supported', score >= p_min_support AND missing = '{}');
    END LOOP;
    RETURN out_scores;
END
$fn$;
COMMENT ON FUNCTION rag._support_scores(jsonb, float8) IS
'Internal: support of each sentence by its quotes [{lexical, similarity, missing, score, supported}]: mean of '
'content-word coverage and MiniLM similarity (rag._support_similarity), numbers and names required verbatim.';

-- A short excerpt of a text for error messages.
CREATE OR REPLACE FUNCTION rag._excerpt(p_text text, p_len integer)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN pg_catalog.length(x.t) <= p_len THEN x.t ELSE pg_catalog.left(x.t, p_len - 1) || '…' END
    FROM (SELECT pg_catalog.regexp_replace(pg_catalog.btrim(coalesce(p_text, '')), '\s+', ' ', 'g') AS t) AS x
$fn$;
COMMENT ON FUNCTION rag._excerpt(text, integer) IS 'Internal: a text on one line, cut to a length.';

-- Checks one reply against the numbered sources of its call. Returns {ok, status, reason, answer, citations,
-- errors, rejected, claims, model_abstain_reason, enforce_ms}:
-- * ok false: the reply failed (reason generator_invalid_output, citation_unverifiable or unsupported_claim;
--   errors say why, for the retry);
-- * ok true, status abstained, reason generator_abstained: the model said the sources do not answer;
-- * ok true, status answered: answer and citations as the caller gets them. Citations that fail (n not a source
--   of this call, quote under 20 characters or not in source n, [n] not in the answer) are removed with their
--   markers and listed in rejected; the reply still passes if every sentence keeps a marker whose quotes
--   support it.
CREATE OR REPLACE FUNCTION rag._enforce_reply(
    p_sources jsonb, p_reply jsonb, p_min_support float8, p_extra_errors jsonb DEFAULT '[]'
)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t0 timestamptz := pg_catalog.clock_timestamp();
    parsed jsonb := rag._parse_reply(p_reply);
    v jsonb := parsed -> 'value';
    -- the SQL checks decide; pydantic's complaints (p_extra_errors) count where these found nothing
    errors jsonb := CASE WHEN pg_catalog.jsonb_array_length(parsed -> 'errors') > 0 THEN parsed -> 'errors'
        ELSE coalesce(p_extra_errors, '[]') END;
    k integer := pg_catalog.jsonb_array_length(p_sources);
    ids bigint [];
    answer_text text;
    c record;
    chk record;
    candidates jsonb := '[]';
    rejected jsonb := '[]';
    kept integer [] := '{}';
    final record;
    claims jsonb;
    support jsonb;
    failed_cites boolean := false;
    failed_support boolean := false;
    elsewhere integer;
    norm_quote text;
BEGIN
    SELECT pg_catalog.array_agg((s ->> 'chunk_id')::bigint ORDER BY (s ->> 'n')::integer) INTO ids
    FROM pg_catalog.jsonb_array_elements(p_sources) AS s;
    IF pg_catalog.jsonb_array_length(errors) > 0 THEN
        RETURN pg_catalog.jsonb_build_object('ok', false, 'status', 'abstained', 'reason', 'generator_invalid_output',
            'errors', errors, 'rejected', '[]'::jsonb, 'claims', '[]'::jsonb,
            'enforce_ms', round((extract(EPOCH FROM pg_catalog.clock_timestamp() - t0) * 1000)::numeric, 3));
    END IF;
    IF (v ->> 'abstain')::boolean THEN
        RETURN pg_catalog.jsonb_build_object('ok', true, 'status', 'abstained', 'reason', 'generator_abstained',
            'model_abstain_reason', v -> 'abstain_reason', 'errors', '[]'::jsonb, 'rejected', '[]'::jsonb,
            'claims', '[]'::jsonb,
            'enforce_ms', round((extract(EPOCH FROM pg_catalog.clock_timestamp() - t0) * 1000)::numeric, 3));
    END IF;
    answer_text := rag._normalize_markers(v ->> 'answer');

    -- each citation on its own: a source of this call, a quote of 20 characters or more, found in source n
    FOR c IN SELECT (e.value ->> 'n')::integer AS n, e.value ->> 'quote' AS quote, e.o
        FROM pg_catalog.jsonb_array_elements(v -> 'citations') WITH ORDINALITY AS e (value, o) LOOP
        norm_quote := pg_catalog.regexp_replace(pg_catalog.btrim(c.quote), '\s+', ' ', 'g');
        IF c.n > k THEN
            rejected := rejected || pg_catalog.jsonb_build_object('n', c.n, 'quote', c.quote, 'why', 'n_out_of_range');
            errors := errors || pg_catalog.to_jsonb(pg_catalog.format(
                'Citation [%s] names no source: the sources are numbered 1 to %s.', c.n, k));
            CONTINUE;
        END IF;
        IF pg_catalog.length(norm_quote) < 20 THEN
            rejected := rejected || pg_catalog.jsonb_build_object('n', c.n, 'quote', c.quote, 'why', 'quote_too_short');
            errors := errors || pg_catalog.to_jsonb(pg_catalog.format(
                'The quote for [%s] ("%s") is %s characters long; a quote is at least 20 characters copied word for '
                'word from its source.', c.n, rag._excerpt(c.quote, 60), pg_catalog.length(norm_quote)));
            CONTINUE;
        END IF;
        IF pg_catalog.strpos(answer_text, '[' || c.n || ']') = 0 THEN
            rejected := rejected || pg_catalog.jsonb_build_object('n', c.n, 'quote', c.quote, 'why', 'not_in_answer');
            CONTINUE;  -- not an error: a quote the answer does not use is dropped
        END IF;
        SELECT * INTO chk FROM rag.verify('[' || c.n || ']', pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
            'n', c.n, 'chunk_id', ids[c.n], 'quote', c.quote)), ids);
        IF chk.status = 'answered' THEN
            -- the support check reads the quote as it stands in the source, with the embedding stored at ingest
            -- when the quote is one of the source's sentences
            candidates := candidates || pg_catalog.jsonb_build_object('n', c.n, 'chunk_id', ids[c.n], 'quote', c.quote,
                'source_text', chk.citations -> 0 -> 'quote',
                'vector', (SELECT s.embedding::text FROM rag.sentence AS s
                    WHERE s.chunk_id = ids[c.n] AND s.start_pos = (chk.citations -> 0 ->> 'quote_start')::integer
                        AND s.end_pos = (chk.citations -> 0 ->> 'quote_end')::integer));
            kept := kept || c.n;
        ELSE
            SELECT min(s.n) INTO elsewhere FROM pg_catalog.generate_series(1, k) AS s (n)
            WHERE s.n <> c.n AND (SELECT x.status FROM rag.verify('[' || s.n || ']', pg_catalog.jsonb_build_array(
                pg_catalog.jsonb_build_object('n', s.n, 'chunk_id', ids[s.n], 'quote', c.quote)), ids) AS x)
                = 'answered';
            rejected := rejected || pg_catalog.jsonb_build_object('n', c.n, 'quote', c.quote,
                'why', 'quote_not_in_source', 'found_in', elsewhere);
            errors := errors || pg_catalog.to_jsonb(pg_catalog.format('The quote for [%s] ("%s") does not occur in '
                'source %s%s.', c.n, rag._excerpt(c.quote, 80), c.n,
                CASE WHEN elsewhere IS NOT NULL THEN pg_catalog.format(' (it occurs in source %s)', elsewhere) ELSE
                    '' END));
        END IF;
    END LOOP;

    -- the sentences, each with the verified quotes of the markers it carries
    SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
        'i', x.i, 'sentence', x.sentence, 'markers', pg_catalog.to_jsonb(x.markers),
        'kept', pg_catalog.to_jsonb(ARRAY(
            SELECT m FROM pg_catalog.unnest(x.markers) AS m WHERE m = ANY (kept) ORDER BY m)),
        'quotes', coalesce((SELECT pg_catalog.jsonb_agg(cd.value -> 'source_text' ORDER BY cd.o)
            FROM pg_catalog.jsonb_array_elements(candidates) WITH ORDINALITY AS cd (value, o)
            WHERE (cd.value ->> 'n')::integer = ANY (x.markers)), '[]'::jsonb),
        'quote_vectors', coalesce((SELECT pg_catalog.jsonb_agg(cd.value -> 'vector' ORDER BY cd.o)
            FROM pg_catalog.jsonb_array_elements(candidates) WITH ORDINALITY AS cd (value, o)
            WHERE (cd.value ->> 'n')::integer = ANY (x.markers)), '[]'::jsonb)
    ) ORDER BY x.i), '[]')
    INTO claims
    FROM rag._answer_claims(answer_text) AS x;
    IF pg_catalog.jsonb_array_length(claims) = 0 THEN
        errors := errors || '"The answer has no sentence."'::jsonb;
        RETURN pg_catalog.jsonb_build_object('ok', false, 'status', 'abstained', 'reason', 'generator_invalid_output',
            'errors', errors, 'rejected', rejected, 'claims', claims,
            'enforce_ms', round((extract(EPOCH FROM pg_catalog.clock_timestamp() - t0) * 1000)::numeric, 3));
    END IF;
    support := rag._support_scores((
        SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('sentence', cl.value ->> 'sentence',
            'quotes', cl.value -> 'quotes', 'quote_vectors', cl.value -> 'quote_vectors') ORDER BY cl.o)
        FROM pg_catalog.jsonb_array_elements(claims) WITH ORDINALITY AS cl (value, o)
    ), p_min_support);
    claims := (SELECT pg_catalog.jsonb_agg(cl.value - 'quote_vectors' ORDER BY cl.o)
        FROM pg_catalog.jsonb_array_elements(claims) WITH ORDINALITY AS cl (value, o));
    -- judge every claim: a marker, a verified quote, and support from the quotes
    SELECT pg_catalog.jsonb_agg(cl.value || CASE
        WHEN pg_catalog.jsonb_array_length(cl.value -> 'markers') = 0 THEN
            '{"supported": false, "why": "no_marker"}'::jsonb
        WHEN pg_catalog.jsonb_array_length(cl.value -> 'kept') = 0 THEN
            '{"supported": false, "why": "citations_rejected"}'::jsonb
        WHEN (support -> (cl.o - 1)::integer ->> 'supported')::boolean THEN support -> (cl.o - 1)::integer
        ELSE (support -> (cl.o - 1)::integer) || '{"why": "not_supported"}'::jsonb
    END ORDER BY cl.o) INTO claims
    FROM pg_catalog.jsonb_array_elements(claims) WITH ORDINALITY AS cl (value, o);
    FOR c IN SELECT cl.value AS claim FROM pg_catalog.jsonb_array_elements(claims) AS cl
        WHERE NOT (cl.value ->> 'supported')::boolean LOOP
        IF c.claim ->> 'why' = 'citations_rejected' THEN
            failed_cites := true;
            errors := errors || pg_catalog.to_jsonb(pg_catalog.format('Sentence %s ("%s") cites %s, but no quote for '
                'it was verified.', c.claim ->> 'i', rag._excerpt(c.claim ->> 'sentence', 80),
                (SELECT pg_catalog.string_agg('[' || m.value || ']', ' ') FROM pg_catalog.jsonb_array_elements_text(
                    c.claim -> 'markers') AS m)));
        ELSIF c.claim ->> 'why' = 'no_marker' THEN
            failed_support := true;
            errors := errors || pg_catalog.to_jsonb(pg_catalog.format('Sentence %s ("%s") has no marker [n].',
                c.claim ->> 'i', rag._excerpt(c.claim ->> 'sentence', 80)));
        ELSE
            failed_support := true;
            errors := errors || pg_catalog.to_jsonb(pg_catalog.format('Sentence %s ("%s") is not supported by the '
                'quotes of %s (support %s, %s needed)%s.', c.claim ->> 'i', rag._excerpt(c.claim ->> 'sentence', 80),
                (SELECT pg_catalog.string_agg('[' || m.value || ']', ' ') FROM pg_catalog.jsonb_array_elements_text(
                    c.claim -> 'kept') AS m), c.claim ->> 'score', p_min_support,
                CASE WHEN pg_catalog.jsonb_array_length(c.claim -> 'missing') > 0 THEN pg_catalog.format(
                    '; the quotes do not contain %s', (SELECT pg_catalog.string_agg(m.value, ', ')
                    FROM pg_catalog.jsonb_array_elements_text(c.claim -> 'missing') AS m)) ELSE '' END));
        END IF;
    END LOOP;
    IF failed_cites OR failed_support THEN
        RETURN pg_catalog.jsonb_build_object('ok', false, 'status', 'abstained',
            'reason', CASE WHEN failed_cites THEN 'citation_unverifiable' ELSE 'unsupported_claim' END,
            'errors', errors, 'rejected', rejected, 'claims', claims,
            'enforce_ms', round((extract(EPOCH FROM pg_catalog.clock_timestamp() - t0) * 1000)::numeric, 3));
    END IF;

    -- rag.verify composes what the caller gets: verified citations with offsets, other markers removed
    SELECT * INTO final FROM rag.verify(answer_text, candidates, ids);
    IF final.status <> 'answered' THEN
        RETURN pg_catalog.jsonb_build_object('ok', false, 'status', 'abstained', 'reason', 'citation_unverifiable',
            'errors', errors || '"No citation could be verified."'::jsonb, 'rejected', rejected, 'claims', claims,
            'enforce_ms', round((extract(EPOCH FROM pg_catalog.clock_timestamp() - t0) * 1000)::numeric, 3));
    END IF;
    RETURN pg_catalog.jsonb_build_object('ok', true, 'status', 'answered', 'reason', NULL, 'answer', final.answer,
        'citations', final.citations, 'errors', errors, 'rejected', rejected, 'claims', claims,
        'enforce_ms', round((extract(EPOCH FROM pg_catalog.clock_timestamp() - t0) * 1000)::numeric, 3));
END
$fn$;
COMMENT ON FUNCTION rag._enforce_reply(jsonb, jsonb, float8, jsonb) IS
'Internal: checks a CitedAnswer against the numbered sources of its call (schema, citation numbers, quotes found '
'by rag.verify, support of every sentence): {ok, status, reason, answer, citations, errors, rejected, claims}.';
