-- Generators (docs/generation.md): OpenAI-compatible chat-completions endpoints that rag.ask may name in its
-- option generator, managed by pgcite_admin. The table holds no secret: a row names the server environment
-- variable that holds the API key (read by pgcite_python when it calls the generator).

-- ---------------------------------------------------------------- which API keys a database may send
-- Server environment variables belong to the whole cluster: the key a superuser set for one database's
-- generators must not be sendable by the administrator of another (any database owner, after a trusted
-- install) to a URL of their choice. A superuser names, per database, the variables its generators may use
-- (setting generator_key_envs; none by default); checked when a generator is created and before every call.
CREATE OR REPLACE FUNCTION rag._key_env_allowed(p_env text)
RETURNS boolean
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT p_env IS NULL OR p_env = ANY (pg_catalog.string_to_array(
        pg_catalog.translate(rag._config_text('generator_key_envs'), E' \t\n', ''), ','))
$fn$;
COMMENT ON FUNCTION rag._key_env_allowed(text) IS
'Internal: whether a generator of this database may send the API key in environment variable p_env (setting '
'generator_key_envs, set by a superuser).';

-- ---------------------------------------------------------------- generators (admin)
CREATE OR REPLACE FUNCTION rag._create_generator(
    p_caller name, p_name text, p_base_url text, p_model text, p_api_key_env text, p_timeout_s float8,
    p_max_tokens integer, p_temperature float8, p_response_format text, p_options jsonb
)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    who regrole := rag._authorize_admin(p_caller);
    reserved text [];
BEGIN
    IF p_options IS NULL OR pg_catalog.jsonb_typeof(p_options) <> 'object' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'options must be a JSON object of extra request fields',
            HINT = 'For example {"top_p": 1, "seed": 7}.';
    END IF;
    -- the fields pgcite sets itself (or that would change the protocol) are not options
    SELECT pg_catalog.array_agg(k.key ORDER BY k.key) INTO reserved
    FROM pg_catalog.jsonb_object_keys(p_options) AS k (key)
    WHERE k.key IN ('model', 'messages', 'stream', 'stream_options', 'n', 'response_format', 'max_tokens',
        'max_completion_tokens', 'temperature', 'tools', 'tool_choice', 'functions', 'function_call', 'logprobs',
        'top_logprobs');
    IF reserved IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('options may not set %s', pg_catalog.array_to_string(reserved, ', ')),
            HINT = 'model, max_tokens, temperature and response_format are arguments of rag.create_generator.';
    END IF;
    -- (a name that is not PGCITE_<NAME> at all is refused by the table's CHECK below: 22023)
    IF p_api_key_env ~ '^PGCITE_[A-Z0-9_]{1,64}$' AND NOT rag._key_env_allowed(p_api_key_env) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('generators of database %s may not send the key in %s',
                pg_catalog.current_database(), p_api_key_env),
            DETAIL = 'Environment variables of the server belong to every database of the cluster; a superuser says '
                'which ones each database may use.',
            HINT = pg_catalog.format('A superuser runs, in this database: SELECT rag.set_config('
                '''generator_key_envs'', %L);', p_api_key_env);
    END IF;
    BEGIN
        INSERT INTO rag.generator AS g (
            name, base_url, model, api_key_env, timeout_s, max_tokens, temperature, response_format, options,
            created_by
        )
        VALUES (
            p_name, pg_catalog.rtrim(p_base_url, '/'), p_model, p_api_key_env, p_timeout_s, p_max_tokens,
            p_temperature, p_response_format, p_options, p_caller
        )
        ON CONFLICT (name) DO UPDATE SET
            base_url = excluded.base_url, model = excluded.model, api_key_env = excluded.api_key_env,
            timeout_s = excluded.timeout_s, max_tokens = excluded.max_tokens, temperature = excluded.temperature,
            response_format = excluded.response_format, options = excluded.options,
            created_by = excluded.created_by, created_at = pg_catalog.now();
    EXCEPTION
        WHEN check_violation OR not_null_violation THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = pg_catalog.format('invalid generator "%s": %s', p_name, SQLERRM),
                HINT = 'name: letters, digits, _.- (63 at most); base_url: http(s)://host[:port][/path] without '
                'user, password, query or fragment; api_key_env: PGCITE_<NAME>; timeout_s 0..600; '
                'max_tokens 16..32768; temperature 0..2; response_format json_schema, json_object or none.';
    END;
    RETURN p_name;
END
$fn$;
COMMENT ON FUNCTION rag._create_generator(name, text, text, text, text, float8, integer, float8, text, jsonb) IS
'Internal (SECURITY DEFINER: writes rag.generator): rag.create_generator for the checked caller.';

CREATE OR REPLACE FUNCTION rag.create_generator(
    name text, base_url text, model text, api_key_env text DEFAULT NULL, timeout_s float8 DEFAULT 60,
    max_tokens integer DEFAULT 1024, temperature float8 DEFAULT 0, response_format text DEFAULT 'json_schema',
    options jsonb DEFAULT '{}'
)
RETURNS text
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._create_generator(current_user, create_generator.name, create_generator.base_url,
        create_generator.model, create_generator.api_key_env, create_generator.timeout_s,
        create_generator.max_tokens, create_generator.temperature, create_generator.response_format,
        create_generator.options)
$fn$;
COMMENT ON FUNCTION rag.create_generator(text, text, text, text, float8, integer, float8, text, jsonb) IS
'Creates or replaces a generator: an OpenAI-compatible chat-completions endpoint (base_url, e.g. '
'http://127.0.0.1:11434/v1) and model for rag.ask(..., options => ''{"generator": "name"}''). The API key is '
'read at call time from the server''s environment variable api_key_env (PGCITE_...), never stored. timeout_s '
'bounds each request; response_format json_schema (structured output), json_object or none. Needs pgcite_admin.';

CREATE OR REPLACE FUNCTION rag._drop_generator(p_caller name, p_name text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    who regrole := rag._authorize_admin(p_caller);
BEGIN
    DELETE FROM rag.generator AS g WHERE g.name = p_name;
    RETURN found;
END
$fn$;
COMMENT ON FUNCTION rag._drop_generator(name, text) IS
'Internal (SECURITY DEFINER: writes rag.generator): rag.drop_generator for the checked caller.';

CREATE OR REPLACE FUNCTION rag.drop_generator(name text)
RETURNS boolean
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._drop_generator(current_user, drop_generator.name)
$fn$;
COMMENT ON FUNCTION rag.drop_generator(text) IS
'Removes a generator (false if there was none). Logged answers keep its name and model. Needs pgcite_admin.';

CREATE OR REPLACE VIEW rag.generators AS
SELECT
    g.name,
    g.base_url,
    g.model,
    g.api_key_env,
    g.timeout_s,
    g.max_tokens,
    g.temperature,
    g.response_format,
    g.options,
    g.created_by,
    g.created_at
FROM rag.generator AS g;
COMMENT ON VIEW rag.generators IS
'The generators rag.ask may name. api_key_env is the name of a server environment variable; no API key is ever '
'stored in the database.';
ALTER VIEW rag.generators OWNER TO pgcite_owner;  -- its owner's rights read rag.generator (000-access.sql)
GRANT SELECT ON rag.generators TO pgcite_reader, pg_database_owner;

-- The generator row, inside the SECURITY DEFINER functions (42704 for an unknown name).
CREATE OR REPLACE FUNCTION rag._require_generator(p_name text)
RETURNS rag.generator
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    g rag.generator;
BEGIN
    SELECT * INTO g FROM rag.generator AS x WHERE x.name = p_name;
    IF NOT found THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_object',
            MESSAGE = pg_catalog.format('generator "%s" does not exist', p_name),
            HINT = 'SELECT name FROM rag.generators lists them; an admin adds one with rag.create_generator.';
    END IF;
    RETURN g;
END
$fn$;
COMMENT ON FUNCTION rag._require_generator(text) IS 'Internal: the generator row, or 42704 for an unknown name.';
