-- Access: who may do what, and the settings only an administrator can change.
--
-- Public functions are SECURITY INVOKER wrappers that pass current_user (the caller) to an internal
-- SECURITY DEFINER function owned by pgcite_owner. The internal function first checks, with
-- rag._authorize, that the session may act as that caller (session_user is the caller or a member of it:
-- a role can only name a role it could SET ROLE to) and that the caller may use the tenant. Everything
-- after that runs as pgcite_owner with every query filtered by tenant explicitly.

-- The tenants the current role may read. Row level security on rag.tenant decides (member of the tenant
-- through rag.tenant_member, directly or through role grants, or pgcite_admin); superusers see all.
-- Used by the policies that guard direct reads.
CREATE OR REPLACE FUNCTION rag._my_tenants()
RETURNS text[]
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(pg_catalog.array_agg(t.tenant), '{}') FROM rag.tenant AS t
$fn$;
COMMENT ON FUNCTION rag._my_tenants() IS
'Internal: tenants the current role may read (all tenants for pgcite_admin). Used by row level security.';

-- pgcite administrators of this database: members of pgcite_admin (a cluster-wide role: every database of
-- the cluster) and the owner of this database (pg_database_owner: this database only; after a trusted
-- CREATE EXTENSION the installing owner administers without holding any cluster-wide role). Superusers too.
CREATE OR REPLACE FUNCTION rag._is_admin(p_role regrole)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN pg_catalog.pg_has_role(p_role, 'pgcite_admin', 'MEMBER')
        OR pg_catalog.pg_has_role(p_role, 'pg_database_owner', 'MEMBER');
END
$fn$;
COMMENT ON FUNCTION rag._is_admin(regrole) IS
'Internal: true for a pgcite administrator of this database (pgcite_admin, or the owner of this database).';

-- Whether a role is a member of a tenant: a membership row for a role (by OID, under the name it was
-- granted to) of which it is a member, directly or through grants. Administrators and superusers: every tenant.
CREATE OR REPLACE FUNCTION rag._is_member(p_role regrole, p_tenant text)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- PL/pgSQL, not sql: a sql function with SET is planned again on every call (0.13 ms of every rag.ask);
    -- PL/pgSQL keeps its plan for the session
    RETURN rag._is_admin(p_role)
        OR EXISTS (
            SELECT FROM rag.tenant_member AS m
            INNER JOIN pg_catalog.pg_roles AS r ON r.oid = m.member_role AND r.rolname = m.member_name
            WHERE m.tenant = p_tenant AND pg_catalog.pg_has_role(p_role, r.oid, 'MEMBER')
        );
END
$fn$;
COMMENT ON FUNCTION rag._is_member(regrole, text) IS
'Internal: true when the role may use the tenant (a live membership it inherits, or pgcite_admin).';

-- The caller of an internal SECURITY DEFINER function, checked: the session must be able to act as it.
CREATE OR REPLACE FUNCTION rag._caller(p_caller name)
RETURNS regrole
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    r regrole := pg_catalog.to_regrole(pg_catalog.quote_ident(p_caller));
BEGIN
    IF r IS NULL OR NOT (p_caller = session_user OR pg_catalog.pg_has_role(session_user, r, 'MEMBER')) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('session user "%s" cannot act as role "%s"', session_user, p_caller),
            HINT = 'Call the public function (rag.ask, rag.ingest, ...); it passes the calling role itself.';
    END IF;
    -- pgcite's functions call public.similarity, OPERATOR(public.<=>), ... by name when they run: a schema
    -- called public that is not the one holding vector, pg_trgm and fuzzystrmatch (the database owner renamed
    -- it and made another) would run someone's functions as pgcite_owner
    IF (SELECT pg_catalog.count(*) FROM pg_catalog.pg_extension AS e
        INNER JOIN pg_catalog.pg_namespace AS n ON n.oid = e.extnamespace
        WHERE e.extname IN ('vector', 'pg_trgm', 'fuzzystrmatch') AND n.nspname = 'public') <> 3 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'schema public no longer holds the extensions vector, pg_trgm and fuzzystrmatch',
            HINT = 'pgcite calls them as public.*: rename the schemas back (ALTER SCHEMA ... RENAME TO public).';
    END IF;
    RETURN r;
END
$fn$;
COMMENT ON FUNCTION rag._caller(name) IS
'Internal: the caller named by a public wrapper, as a role; 42501 unless the session user is that role or a '
'member of it; 55000 when schema public is not the one holding vector, pg_trgm and fuzzystrmatch.';

-- Authorises a caller for a tenant: 'read' (pgcite_reader and a member), 'write' (pgcite_writer and a
-- member) or 'admin' (pgcite_admin). Returns the tenant row; 42704 for an unknown tenant, 42501 otherwise.
CREATE OR REPLACE FUNCTION rag._authorize(p_caller name, p_tenant text, p_need text)
RETURNS rag.tenant
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    who regrole := rag._caller(p_caller);
    group_role text := CASE p_need WHEN 'read' THEN 'pgcite_reader' WHEN 'write' THEN 'pgcite_writer'
        ELSE 'pgcite_admin' END;
    t rag.tenant;
BEGIN
    IF NOT (pg_catalog.pg_has_role(who, group_role, 'MEMBER') OR rag._is_admin(who)) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('role "%s" is not a member of %s', p_caller, group_role),
            HINT = pg_catalog.format('GRANT %s TO %I;', group_role, p_caller);
    END IF;
    IF p_tenant IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'tenant must not be NULL';
    END IF;
    SELECT * INTO t FROM rag.tenant AS x WHERE x.tenant = p_tenant;
    IF NOT found THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_object',
            MESSAGE = pg_catalog.format('tenant "%s" does not exist', p_tenant),
            HINT = 'Create it with rag.create_tenant(tenant).';
    END IF;
    IF NOT rag._is_member(who, p_tenant) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('role "%s" is not a member of tenant "%s"', p_caller, p_tenant),
            HINT = 'An admin grants access with rag.grant_tenant(tenant, role).';
    END IF;
    RETURN t;
END
$fn$;
COMMENT ON FUNCTION rag._authorize(name, text, text) IS
'Internal (SECURITY DEFINER: sees every tenant, to tell 42704 from 42501): checks the caller (rag._caller), its '
'pgcite role for p_need (read, write, admin) and its membership of the tenant; returns the tenant row. 42704 for '
'an unknown tenant, 42501 for a non-member.';

-- An admin-only operation that names no tenant.
CREATE OR REPLACE FUNCTION rag._authorize_admin(p_caller name)
RETURNS regrole
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    who regrole := rag._caller(p_caller);
BEGIN
    IF NOT rag._is_admin(who) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('role "%s" is not a member of pgcite_admin', p_caller),
            HINT = 'Tenants, memberships, calibration and settings are managed by pgcite_admin and the owner of '
                'the database.';
    END IF;
    RETURN who;
END
$fn$;
COMMENT ON FUNCTION rag._authorize_admin(name) IS
'Internal: the caller as a role; 42501 unless it is an administrator (rag._is_admin).';

-- The tenant row, or 42704 for an unknown tenant. Inside the SECURITY DEFINER functions, after rag._authorize.
CREATE OR REPLACE FUNCTION rag._require_tenant(p_tenant text)
RETURNS rag.tenant
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant;
BEGIN
    SELECT * INTO t FROM rag.tenant WHERE tenant = p_tenant;
    IF NOT found THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_object',
            MESSAGE = pg_catalog.format('tenant "%s" does not exist', p_tenant),
            HINT = 'Create it with rag.create_tenant(tenant).';
    END IF;
    RETURN t;
END
$fn$;
COMMENT ON FUNCTION rag._require_tenant(text) IS 'Internal: the tenant row, or 42704 for an unknown tenant.';

-- ---------------------------------------------------------------- settings
-- Every setting pgcite reads: its kind, default, bounds, and who may set it. Settings shape answers, the gate,
-- limits and which code runs, so none is taken from a session: they live in rag.config (rag.set_config), else
-- they have their default. A pgcite.* run-time parameter (SET, ALTER ROLE, PGOPTIONS, postgresql.conf) is
-- never read: one that differs from the value in force is refused (42501), so nobody believes it applies.
CREATE OR REPLACE FUNCTION rag._settings_catalog()
RETURNS TABLE (
    name text, kind text, default_value text, min_value float8, max_value float8, superuser_only boolean,
    in_answer boolean, description text
)
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- PL/pgSQL: a sql function with SET is planned again on every call (twice per rag.ask)
    RETURN QUERY SELECT * FROM (VALUES
        ('rrf_k', 'number', '5', 0::float8, 1000::float8, false, true, 'reciprocal rank fusion constant'),
        ('weight_vector', 'number', '1.0', 0, 100, false, true, 'weight of the vector leg'),
        ('weight_fts', 'number', '0.25', 0, 100, false, true, 'weight of the full-text leg (BM25)'),
        ('weight_trgm', 'number', '0.1', 0, 100, false, true, 'weight of the title-trigram leg'),
        ('min_title_similarity', 'number', '0.5', 0, 1, false, true, 'title trigram leg cut-off'),
        ('exact_search_limit', 'number', '20000', 0, 1e12, false, true,
            'tenants with at most this many live chunks are searched exactly; larger ones through HNSW'),
        ('typo_similarity', 'number', '0.3', 0, 1, false, true, 'trigram cut-off of spelling correction'),
        ('min_score', 'number', '0.5', 0, 1, false, true, 'gate threshold of tenants not calibrated'),
        ('min_support', 'number', '0.7', 0, 1, false, true,
            'support a generated sentence needs from its quotes (docs/generation.md)'),
        ('max_document_bytes', 'number', '20971520', 1, 1073741824, false, false,
            'largest document (bytes) rag.ingest, rag.store_document and rag.chunk_* accept'),
        ('max_chunk_bytes', 'number', '16384', 1024, 1073741824, false, false,
            'largest chunk content (bytes) a stored document may hold: every ask that retrieves a chunk reads it '
            'whole (the gate, quote choice, verification)'),
        ('model', 'text', 'sentence-transformers/all-MiniLM-L6-v2', NULL, NULL, true, false,
            'the embedding model name recorded for new chunks'),
        ('python_path', 'text', '/opt/pgcite/venv', NULL, NULL, true, false,
            'the DB-side Python venv (or its site-packages) that pgcite_python imports from'),
        ('torch_threads', 'number', '1', 1, 64, false, false, 'threads per backend for embedding'),
        ('background_embedding', 'number', '1', 0, 2, false, false,
            'a question embedded on a worker thread of the backend while retrieval''s other legs run: 1 while the '
            'machine has a core to spare, 2 always, 0 never (read when a backend embeds its first question)'),
        ('embedding_huge_pages', 'number', '1', 0, 1, false, false,
            'the embedding model''s weights backed by transparent huge pages where the kernel allows them: 1 '
            '(about 15 % off each embedding), 0 not (read when a backend loads the model)'),
        ('generator_key_envs', 'text', '', NULL, NULL, true, false,
            'the server environment variables (PGCITE_..., comma-separated) whose API keys this database''s '
            'generators may send; none by default')
    ) AS s (name, kind, default_value, min_value, max_value, superuser_only, in_answer, description);
END
$fn$;
COMMENT ON FUNCTION rag._settings_catalog() IS 'Internal: every pgcite setting, its default, bounds and who sets it.';

-- The value of one setting: rag.config, else its default. A pgcite.<name> parameter that differs from it
-- (set by a session, a role, a client or postgresql.conf: PostgreSQL cannot tell which for a parameter no
-- library defines) is refused with 42501 rather than silently ignored.
CREATE OR REPLACE FUNCTION rag._config_text(p_name text)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    s record;
    v text;
    g text := pg_catalog.current_setting('pgcite.' || p_name, true);
BEGIN
    SELECT * INTO s FROM rag._settings_catalog() AS c WHERE c.name = p_name;
    SELECT c.value INTO v FROM rag.config AS c WHERE c.name = p_name;
    v := coalesce(v, s.default_value);
    IF coalesce(g, '') <> '' AND g IS DISTINCT FROM v
        AND NOT (s.kind = 'number' AND g ~ '^\s*-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?\s*$' AND g::float8 = v::float8) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('pgcite.%s = "%s" is not applied: pgcite reads its settings from rag.config',
                p_name, g),
            DETAIL = pg_catalog.format('The value in force is "%s". Settings shape answers, the gate and the code '
                'that runs, so no session, role or client may choose them.', v),
            -- (RESET restores the value a connection was opened with, e.g. from PGOPTIONS; an empty one counts as
            -- none, security review of session 19)
            HINT = pg_catalog.format('SET pgcite.%s = '''' (or remove it from the connection options, the role''s '
                'settings or postgresql.conf); an admin uses SELECT rag.set_config(%L, ...).', p_name, p_name);
    END IF;
    RETURN v;
END
$fn$;
COMMENT ON FUNCTION rag._config_text(text) IS
'Internal: a setting from rag.config, else its default; 42501 when a pgcite.* parameter tries to choose another '
'value.';

-- All numeric settings that shape an answer, as one JSON object (read once per call, logged with every ask).
CREATE OR REPLACE FUNCTION rag._params()
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    params jsonb;
BEGIN
    -- one query for all of them; rag._config_text (which refuses a differing parameter) only for the
    -- settings that have a pgcite.* parameter at all
    SELECT pg_catalog.jsonb_object_agg(c.name, coalesce(x.value, c.default_value)::float8)
    INTO params
    FROM rag._settings_catalog() AS c
    LEFT JOIN rag.config AS x ON c.name = x.name
    WHERE c.in_answer;
    IF EXISTS (SELECT FROM rag._settings_catalog() AS c
               WHERE c.in_answer AND coalesce(pg_catalog.current_setting('pgcite.' || c.name, true), '') <> '') THEN
        PERFORM rag._config_text(c.name) FROM rag._settings_catalog() AS c WHERE c.in_answer;
    END IF;
    RETURN params;
END
$fn$;
COMMENT ON FUNCTION rag._params() IS 'Internal: the settings that shape an answer, {name: number}.';

-- Numeric settings (for the callers that need just one).
CREATE OR REPLACE FUNCTION rag._setting(p_name text, p_default float8)
RETURNS float8
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(rag._config_text(pg_catalog.regexp_replace(p_name, '^pgcite\.', ''))::float8, p_default)
$fn$;
COMMENT ON FUNCTION rag._setting(text, float8) IS 'Internal: the numeric value of a setting (rag._config_text).';

CREATE OR REPLACE FUNCTION rag.model_name()
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._config_text('model')
$fn$;
COMMENT ON FUNCTION rag.model_name() IS
'The embedding model recorded for new chunks and questions (setting model; default all-MiniLM-L6-v2).';

CREATE OR REPLACE FUNCTION rag._set_config(p_caller name, p_name text, p_value text)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    who regrole := rag._authorize_admin(p_caller);
    s record;
    n float8;
BEGIN
    SELECT * INTO s FROM rag._settings_catalog() AS c WHERE c.name = p_name;
    IF NOT found THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('unknown setting "%s"', p_name),
            HINT = 'SELECT * FROM rag.settings lists them.';
    END IF;
    IF s.superuser_only AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.oid = who) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('only a superuser can set %s', p_name),
            DETAIL = 'It chooses the code or model the server runs.';
    END IF;
    IF p_value IS NULL THEN
        DELETE FROM rag.config AS c WHERE c.name = p_name;
        RETURN rag._config_text(p_name);
    END IF;
    IF s.kind = 'number' THEN
        BEGIN
            n := p_value::float8;
        EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
            n := NULL;
        END;
        IF n IS NULL OR n = 'NaN'::float8 OR n NOT BETWEEN s.min_value AND s.max_value THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = pg_catalog.format('setting %s must be a number between %s and %s, not "%s"',
                    p_name, s.min_value, s.max_value, p_value);
        END IF;
    ELSIF pg_catalog.btrim(p_value) = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('setting %s must not be empty', p_name);
    END IF;
    INSERT INTO rag.config AS c (name, value, set_by) VALUES (p_name, p_value, p_caller)
    ON CONFLICT (name) DO UPDATE SET value = excluded.value, set_by = excluded.set_by, set_at = pg_catalog.now();
    RETURN p_value;
END
$fn$;
COMMENT ON FUNCTION rag._set_config(name, text, text) IS
'Internal (SECURITY DEFINER: writes rag.config): rag.set_config for the checked caller.';

CREATE OR REPLACE FUNCTION rag.set_config(name text, value text)
RETURNS text
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._set_config(current_user, set_config.name, set_config.value)
$fn$;
COMMENT ON FUNCTION rag.set_config(text, text) IS
'Sets a pgcite setting for this database (pgcite_admin; model and python_path: superuser); NULL removes it, so '
'the default applies again. Returns the value now in force. 22023 for an unknown '
'setting or a value out of bounds.';

CREATE OR REPLACE VIEW rag.settings AS
SELECT
    c.name,
    coalesce(x.value, c.default_value) AS value,
    c.default_value,
    CASE WHEN x.name IS NOT NULL THEN 'rag.config' ELSE 'default' END AS source,
    x.set_by,
    x.set_at,
    c.superuser_only,
    c.description
FROM rag._settings_catalog() AS c
LEFT JOIN rag.config AS x ON c.name = x.name;
COMMENT ON VIEW rag.settings IS 'Every pgcite setting in force, where it comes from, and its default.';
-- A view reads its tables with its owner's rights: pgcite_owner's (the tables' owner), not those of whoever
-- installed (a superuser, who bypasses row level security; the role running `pgcite install`, who has no
-- right on rag.generator at all).
ALTER VIEW rag.settings OWNER TO pgcite_owner;
