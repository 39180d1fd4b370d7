-- 0.3.0: generated answers held to proof (docs/generation.md).
-- * rag.generator: OpenAI-compatible chat-completions endpoints an admin configured. The API key is not in
--   the database: a row names an environment variable of the server (PGCITE_...) that holds it.
-- * rag.context: the numbered sources and prompt that rag.context handed to a caller's own generator, until
--   rag.answer checks the caller's reply against them (once).

CREATE TABLE rag.generator (
    name text PRIMARY KEY
    CONSTRAINT generator_name_format CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
    -- http(s) only, no user:password@, no query or fragment: a URL never carries a secret
    base_url text NOT NULL
    CONSTRAINT generator_base_url CHECK (base_url ~ '^https?://[^/@?#[:space:]]+(/[^?#@[:space:]]*)?$'),
    model text NOT NULL CHECK (model <> '' AND pg_catalog.length(model) <= 200),
    api_key_env text CONSTRAINT generator_api_key_env CHECK (api_key_env ~ '^PGCITE_[A-Z0-9_]{1,64}$'),
    timeout_s float8 NOT NULL DEFAULT 60 CHECK (timeout_s > 0 AND timeout_s <= 600),
    max_tokens integer NOT NULL DEFAULT 1024 CHECK (max_tokens BETWEEN 16 AND 32768),
    temperature float8 NOT NULL DEFAULT 0 CHECK (temperature BETWEEN 0 AND 2),
    response_format text NOT NULL DEFAULT 'json_schema'
    CHECK (response_format IN ('json_schema', 'json_object', 'none')),
    options jsonb NOT NULL DEFAULT '{}' CHECK (pg_catalog.jsonb_typeof(options) = 'object'),
    created_by name NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE rag.generator IS
'OpenAI-compatible chat-completions endpoints for generated answers (rag.create_generator, pgcite_admin). '
'api_key_env names an environment variable of the database server holding the API key; the key itself is '
'never stored in the database. Read only by pgcite''s own functions; rag.generators lists them.';

CREATE TABLE rag.context (
    context_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text NOT NULL REFERENCES rag.tenant (tenant),
    role_name name NOT NULL,
    created_at timestamptz NOT NULL,
    question text NOT NULL,
    k integer NOT NULL,
    options jsonb NOT NULL,
    settings jsonb NOT NULL,
    model text,
    query_embedding_supplied boolean NOT NULL,
    query_embedding public.vector(384),
    chunk_ids bigint[] NOT NULL,
    sources jsonb NOT NULL,
    prompt jsonb NOT NULL,
    evidence jsonb NOT NULL,
    timings jsonb NOT NULL,
    attempts jsonb NOT NULL DEFAULT '[]',
    ask_id bigint REFERENCES rag.ask_log (ask_id),
    answered_at timestamptz
);
CREATE INDEX context_tenant_idx ON rag.context (tenant, context_id);
COMMENT ON TABLE rag.context IS
'What rag.context handed to a caller''s own generator: the numbered sources, the prompt and the gate''s '
'evidence. rag.answer checks the reply against exactly these sources, once (ask_id is then set).';

SELECT pg_catalog.pg_extension_config_dump('rag.generator', '');
SELECT pg_catalog.pg_extension_config_dump('rag.context', '');
SELECT pg_catalog.pg_extension_config_dump('rag.context_context_id_seq', '');
-- no policy on rag.generator: no pgcite role reads it directly (rag.generators is the list)
ALTER TABLE rag.generator ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.context ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.generator OWNER TO pgcite_owner;
ALTER TABLE rag.context OWNER TO pgcite_owner;

-- rag.replay's result gained citations_verify and recheck (a changed result type is recreated, not replaced)
DROP FUNCTION IF EXISTS rag.replay(bigint);
DROP FUNCTION IF EXISTS rag._replay(name, bigint);
