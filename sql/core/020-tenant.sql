-- Tenants and who may use them. Run by a superuser or a member of pgcite_admin.

CREATE OR REPLACE FUNCTION rag._create_tenant(p_caller name, p_tenant text, p_ts_config regconfig)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize_admin(p_caller);
    IF p_tenant IS NULL OR p_tenant !~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('invalid tenant name "%s"', p_tenant),
            HINT = 'Use 1 to 63 letters, digits, "_", "." or "-", starting with a letter or digit.';
    END IF;
    IF p_ts_config IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'ts_config must not be NULL';
    END IF;
    INSERT INTO rag.tenant (tenant, ts_config) VALUES (p_tenant, p_ts_config)
    ON CONFLICT ON CONSTRAINT tenant_pkey DO NOTHING;
    INSERT INTO rag.log_head (tenant) VALUES (p_tenant) ON CONFLICT DO NOTHING;
    RETURN p_tenant;
END
$fn$;
COMMENT ON FUNCTION rag._create_tenant(name, text, regconfig) IS
'Internal (SECURITY DEFINER: writes rag.tenant and rag.log_head): rag.create_tenant for the checked caller.';

CREATE OR REPLACE FUNCTION rag.create_tenant(tenant text, ts_config regconfig DEFAULT 'pg_catalog.english')
RETURNS text
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._create_tenant(current_user, create_tenant.tenant, create_tenant.ts_config)
$fn$;
COMMENT ON FUNCTION rag.create_tenant(text, regconfig) IS
'Creates a tenant (idempotent). ts_config is the text search configuration of its corpus. Needs pgcite_admin.';

CREATE OR REPLACE FUNCTION rag._grant_tenant(p_caller name, p_tenant text, p_member regrole)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'admin');
    IF p_member IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'member must not be NULL';
    END IF;
    -- memberships of roles that were dropped (or renamed) are removed as soon as an admin touches the tenant
    DELETE FROM rag.tenant_member AS m
    WHERE m.tenant = p_tenant AND NOT EXISTS (
        SELECT FROM pg_catalog.pg_roles AS r WHERE r.oid = m.member_role AND r.rolname = m.member_name);
    INSERT INTO rag.tenant_member AS m (tenant, member_role, member_name)
    SELECT p_tenant, p_member, r.rolname FROM pg_catalog.pg_roles AS r WHERE r.oid = p_member
    ON CONFLICT (tenant, member_role) DO NOTHING;
END
$fn$;
COMMENT ON FUNCTION rag._grant_tenant(name, text, regrole) IS
'Internal (SECURITY DEFINER: writes rag.tenant_member): rag.grant_tenant for the checked caller.';

CREATE OR REPLACE FUNCTION rag.grant_tenant(tenant text, member regrole)
RETURNS void
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._grant_tenant(current_user, grant_tenant.tenant, grant_tenant.member)
$fn$;
COMMENT ON FUNCTION rag.grant_tenant(text, regrole) IS
'Lets a role (and every role that is a member of it) read the tenant; the role is resolved like any regrole '
'(''"Team-A"'' is the role Team-A) and stored by OID. Give it pgcite_reader or pgcite_writer too. Needs pgcite_admin.';

CREATE OR REPLACE FUNCTION rag._revoke_tenant(p_caller name, p_tenant text, p_member regrole)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    n integer;
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'admin');
    DELETE FROM rag.tenant_member AS m WHERE m.tenant = p_tenant AND m.member_role = p_member;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n > 0;
END
$fn$;
COMMENT ON FUNCTION rag._revoke_tenant(name, text, regrole) IS
'Internal (SECURITY DEFINER: writes rag.tenant_member): rag.revoke_tenant for the checked caller.';

CREATE OR REPLACE FUNCTION rag.revoke_tenant(tenant text, member regrole)
RETURNS boolean
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._revoke_tenant(current_user, revoke_tenant.tenant, revoke_tenant.member)
$fn$;
COMMENT ON FUNCTION rag.revoke_tenant(text, regrole) IS
'Removes a role''s membership of a tenant; true when it was a member. Needs pgcite_admin.';

-- Memberships whose role was dropped never match (rag._is_member needs the live role under its granted
-- name); this removes them for good, in every tenant.
CREATE OR REPLACE FUNCTION rag._prune_members(p_caller name)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    n integer;
BEGIN
    PERFORM rag._authorize_admin(p_caller);
    DELETE FROM rag.tenant_member AS m
    WHERE NOT EXISTS (
        SELECT FROM pg_catalog.pg_roles AS r WHERE r.oid = m.member_role AND r.rolname = m.member_name);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$fn$;
COMMENT ON FUNCTION rag._prune_members(name) IS
'Internal (SECURITY DEFINER: writes rag.tenant_member): rag.prune_members for the checked caller.';

CREATE OR REPLACE FUNCTION rag.prune_members()
RETURNS integer
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._prune_members(current_user)
$fn$;
COMMENT ON FUNCTION rag.prune_members() IS
'Deletes the memberships of dropped or renamed roles (they already grant nothing); returns how many. '
'Needs pgcite_admin.';
