-- Access: who may see which tenant. Everything else asks these functions.

-- The tenants the current role may read. Row level security on rag.tenant decides (member of the tenant
-- through rag.tenant_member, directly or through role grants, or pgcite_admin); superusers see all.
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

-- Whether a tenant exists at all, visible or not. SECURITY DEFINER so that a non-member is told
-- "not a member" (42501) rather than "does not exist"; it reveals nothing else.
CREATE OR REPLACE FUNCTION rag._tenant_exists(p_tenant text)
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT EXISTS (SELECT FROM rag.tenant AS t WHERE t.tenant = p_tenant)
$fn$;
COMMENT ON FUNCTION rag._tenant_exists(text) IS 'Internal: true when the tenant exists (whoever may read it).';

-- The tenant row, or 42704 for an unknown tenant and 42501 for one the caller is not a member of.
CREATE OR REPLACE FUNCTION rag._require_tenant(p_tenant text)
RETURNS rag.tenant
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant;
BEGIN
    IF p_tenant IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'tenant must not be NULL';
    END IF;
    SELECT * INTO t FROM rag.tenant WHERE tenant = p_tenant;
    IF found THEN
        RETURN t;
    END IF;
    IF rag._tenant_exists(p_tenant) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('role "%s" is not a member of tenant "%s"', current_user, p_tenant),
            HINT = 'An admin grants access with rag.grant_tenant(tenant, role).';
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'undefined_object',
        MESSAGE = pg_catalog.format('tenant "%s" does not exist', p_tenant),
        HINT = 'Create it with rag.create_tenant(tenant).';
END
$fn$;
COMMENT ON FUNCTION rag._require_tenant(text) IS
'Internal: the tenant row, or 42704 (unknown tenant) / 42501 (caller is not a member).';

-- Numeric settings pgcite.* with a default when unset or empty.
CREATE OR REPLACE FUNCTION rag._setting(p_name text, p_default float8)
RETURNS float8
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v text := pg_catalog.current_setting(p_name, true);
BEGIN
    IF v IS NULL OR v = '' THEN
        RETURN p_default;
    END IF;
    RETURN v::float8;
EXCEPTION WHEN invalid_text_representation THEN
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = pg_catalog.format('setting %s must be a number, not "%s"', p_name, v);
END
$fn$;
COMMENT ON FUNCTION rag._setting(text, float8) IS
'Internal: the numeric value of setting p_name (pgcite.*), or p_default when it is not set.';

CREATE OR REPLACE FUNCTION rag.model_name()
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(
        nullif(pg_catalog.current_setting('pgcite.model', true), ''),
        'sentence-transformers/all-MiniLM-L6-v2'
    )
$fn$;
COMMENT ON FUNCTION rag.model_name() IS
'The embedding model used for new chunks and questions (setting pgcite.model; default all-MiniLM-L6-v2).';
