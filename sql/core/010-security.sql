-- Row level security and grants. Tables carry the tenant; a non-superuser sees only the rows of
-- tenants it belongs to, whatever query it runs. Functions are SECURITY INVOKER unless noted,
-- so these policies apply inside rag.ask and rag.retrieve too.

GRANT USAGE ON SCHEMA rag TO pgcite_reader;

GRANT SELECT ON rag.tenant, rag.tenant_member, rag.document, rag.chunk, rag.term, rag.ask_log TO pgcite_reader;
GRANT INSERT ON rag.document, rag.chunk, rag.term TO pgcite_writer;
GRANT INSERT ON rag.ask_log TO pgcite_reader;
GRANT UPDATE (retired_at) ON rag.document, rag.chunk TO pgcite_writer;
GRANT UPDATE (model) ON rag.tenant TO pgcite_writer;
GRANT INSERT, UPDATE, DELETE ON rag.tenant, rag.tenant_member TO pgcite_admin;

-- Membership rows: a role sees those that make it a member; admins see all. Built-ins only, so the
-- tenant policy below can consult this table without recursion.
DROP POLICY IF EXISTS member_read ON rag.tenant_member;
CREATE POLICY member_read ON rag.tenant_member FOR SELECT
USING (
    pg_catalog.pg_has_role(current_user, 'pgcite_admin', 'MEMBER')
    OR (
        EXISTS (
            SELECT FROM pg_catalog.pg_roles AS r
            WHERE r.rolname = tenant_member.member
        )
        AND pg_catalog.pg_has_role(current_user, tenant_member.member, 'MEMBER')
    )
);

DROP POLICY IF EXISTS member_admin ON rag.tenant_member;
CREATE POLICY member_admin ON rag.tenant_member TO pgcite_admin
USING (true) WITH CHECK (true);

DROP POLICY IF EXISTS tenant_read ON rag.tenant;
CREATE POLICY tenant_read ON rag.tenant FOR SELECT
USING (
    pg_catalog.pg_has_role(current_user, 'pgcite_admin', 'MEMBER')
    OR EXISTS (
        SELECT FROM rag.tenant_member AS m
        WHERE m.tenant = tenant.tenant
    )
);

DROP POLICY IF EXISTS tenant_model ON rag.tenant;
CREATE POLICY tenant_model ON rag.tenant FOR UPDATE TO pgcite_writer
USING (tenant = any((SELECT rag._my_tenants())::text[]));

DROP POLICY IF EXISTS tenant_admin ON rag.tenant;
CREATE POLICY tenant_admin ON rag.tenant TO pgcite_admin
USING (true) WITH CHECK (true);

DROP POLICY IF EXISTS document_tenant ON rag.document;
CREATE POLICY document_tenant ON rag.document
USING (tenant = any((SELECT rag._my_tenants())::text[]))
WITH CHECK (tenant = any((SELECT rag._my_tenants())::text[]));

DROP POLICY IF EXISTS chunk_tenant ON rag.chunk;
CREATE POLICY chunk_tenant ON rag.chunk
USING (tenant = any((SELECT rag._my_tenants())::text[]))
WITH CHECK (tenant = any((SELECT rag._my_tenants())::text[]));

DROP POLICY IF EXISTS term_tenant ON rag.term;
CREATE POLICY term_tenant ON rag.term
USING (tenant = any((SELECT rag._my_tenants())::text[]))
WITH CHECK (tenant = any((SELECT rag._my_tenants())::text[]));

-- Readers see and append entries of their own tenants, as themselves; the chain is computed by a trigger.
DROP POLICY IF EXISTS ask_log_tenant ON rag.ask_log;
CREATE POLICY ask_log_tenant ON rag.ask_log FOR SELECT
USING (tenant = any((SELECT rag._my_tenants())::text[]));

DROP POLICY IF EXISTS ask_log_append ON rag.ask_log;
CREATE POLICY ask_log_append ON rag.ask_log FOR INSERT
WITH CHECK (tenant = any((SELECT rag._my_tenants())::text[]) AND role_name = current_user);

-- Chunks are immutable: only retired_at may change, once, from NULL to a time.
-- (tsv is generated from title and content, and not yet computed in a BEFORE trigger's NEW.)
CREATE OR REPLACE FUNCTION rag._chunk_immutable()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'chunks are never deleted',
            HINT = 'Use rag.delete_document(tenant, doc_key): it retires the chunks and keeps them citable.';
    END IF;
    IF OLD.retired_at IS NOT NULL
        OR (pg_catalog.to_jsonb(NEW) - ARRAY['retired_at', 'tsv'])
            IS DISTINCT FROM (pg_catalog.to_jsonb(OLD) - ARRAY['retired_at', 'tsv']) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('chunk %s is immutable', OLD.chunk_id),
            DETAIL = 'A chunk_id means the same text forever; only retiring it (once) is allowed.';
    END IF;
    RETURN NEW;
END
$fn$;

DROP TRIGGER IF EXISTS chunk_immutable ON rag.chunk;
CREATE TRIGGER chunk_immutable BEFORE UPDATE OR DELETE ON rag.chunk
FOR EACH ROW EXECUTE FUNCTION rag._chunk_immutable();

-- The audit log is append-only.
CREATE OR REPLACE FUNCTION rag._ask_log_append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'insufficient_privilege',
        MESSAGE = pg_catalog.format('rag.ask_log is append-only (%s refused)', TG_OP),
        HINT = 'Entries are hash-chained per tenant; rag.verify_log(tenant) checks the chain.';
END
$fn$;

DROP TRIGGER IF EXISTS ask_log_append_only ON rag.ask_log;
CREATE TRIGGER ask_log_append_only BEFORE UPDATE OR DELETE ON rag.ask_log
FOR EACH ROW EXECUTE FUNCTION rag._ask_log_append_only();

DROP TRIGGER IF EXISTS ask_log_no_truncate ON rag.ask_log;
CREATE TRIGGER ask_log_no_truncate BEFORE TRUNCATE ON rag.ask_log
FOR EACH STATEMENT EXECUTE FUNCTION rag._ask_log_append_only();
