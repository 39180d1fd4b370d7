-- Access: who may see which tenant. Everything else asks these functions.

-- The tenants the current role may read: those it is a member of (directly or through role grants),
-- or every tenant for pgcite_admin. SECURITY DEFINER because it reads rag.tenant_member for the caller,
-- who may not see membership rows of other roles; it returns only the caller's own tenants.
CREATE OR REPLACE FUNCTION rag._my_tenants()
RETURNS text []
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE
        WHEN pg_catalog.pg_has_role(current_user, 'pgcite_admin', 'MEMBER')
            THEN (SELECT coalesce(pg_catalog.array_agg(t.tenant), '{}') FROM rag.tenant AS t)
        ELSE (
            SELECT coalesce(pg_catalog.array_agg(DISTINCT m.tenant), '{}')
            FROM rag.tenant_member AS m
            WHERE
                EXISTS (SELECT FROM pg_catalog.pg_roles AS r WHERE r.rolname = m.member)
                AND pg_catalog.pg_has_role(current_user, m.member, 'MEMBER')
        )
    END
$fn$;
REVOKE ALL ON FUNCTION rag._my_tenants() FROM PUBLIC;
COMMENT ON FUNCTION rag._my_tenants() IS
'Internal: tenants the current role may read (all tenants for pgcite_admin). Used by row level security.';

-- Raises 42704 for an unknown tenant and 42501 for a tenant the caller is not a member of.
-- Unknown and forbidden are told apart only for roles that could see the tenant exists anyway
-- (admins); for everyone else a tenant they cannot read is reported as not found or forbidden
-- as documented in docs/errors.md.
CREATE OR REPLACE FUNCTION rag._require_tenant(p_tenant text)
RETURNS rag.tenant
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
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
    IF NOT found THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_object',
            MESSAGE = pg_catalog.format('tenant "%s" does not exist', p_tenant),
            HINT = 'Create it with rag.create_tenant(tenant).';
    END IF;
    IF NOT (p_tenant = ANY (rag._my_tenants())) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('role "%s" is not a member of tenant "%s"', current_user, p_tenant),
            HINT = 'An admin grants access with rag.grant_tenant(tenant, role).';
    END IF;
    RETURN t;
END
$fn$;
REVOKE ALL ON FUNCTION rag._require_tenant(text) FROM PUBLIC;
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
