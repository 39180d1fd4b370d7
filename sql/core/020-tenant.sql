-- Tenants and who may use them. Run by a superuser or a member of pgcite_admin.

CREATE OR REPLACE FUNCTION rag.create_tenant(tenant text, ts_config regconfig DEFAULT 'pg_catalog.english')
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF create_tenant.tenant IS NULL OR create_tenant.tenant !~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('invalid tenant name "%s"', create_tenant.tenant),
            HINT = 'Use 1 to 63 letters, digits, "_", "." or "-", starting with a letter or digit.';
    END IF;
    INSERT INTO rag.tenant (tenant, ts_config) VALUES (create_tenant.tenant, create_tenant.ts_config)
    ON CONFLICT ON CONSTRAINT tenant_pkey DO NOTHING;
    RETURN create_tenant.tenant;
END
$fn$;
COMMENT ON FUNCTION rag.create_tenant(text, regconfig) IS
'Creates a tenant (idempotent). ts_config is the text search configuration of its corpus.';

CREATE OR REPLACE FUNCTION rag.grant_tenant(tenant text, member regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF member IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'member must not be NULL';
    END IF;
    PERFORM rag._require_tenant(grant_tenant.tenant);
    INSERT INTO rag.tenant_member (tenant, member)
    VALUES (grant_tenant.tenant, member::text)
    ON CONFLICT DO NOTHING;
END
$fn$;
COMMENT ON FUNCTION rag.grant_tenant(text, regrole) IS
'Lets a role (and every role that is a member of it) read the tenant. Give it pgcite_reader or pgcite_writer too.';

CREATE OR REPLACE FUNCTION rag.revoke_tenant(tenant text, member regrole)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    n integer;
BEGIN
    PERFORM rag._require_tenant(revoke_tenant.tenant);
    DELETE FROM rag.tenant_member AS m
    WHERE m.tenant = revoke_tenant.tenant AND m.member = revoke_tenant.member::text;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n > 0;
END
$fn$;
COMMENT ON FUNCTION rag.revoke_tenant(text, regrole) IS
'Removes a role''s membership of a tenant; true when it was a member.';

GRANT EXECUTE ON FUNCTION rag.model_name() TO pgcite_reader;
REVOKE ALL ON FUNCTION rag.create_tenant(text, regconfig) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.grant_tenant(text, regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.revoke_tenant(text, regrole) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.create_tenant(text, regconfig) TO pgcite_admin;
GRANT EXECUTE ON FUNCTION rag.grant_tenant(text, regrole) TO pgcite_admin;
GRANT EXECUTE ON FUNCTION rag.revoke_tenant(text, regrole) TO pgcite_admin;
