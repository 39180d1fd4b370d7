-- Row level security and grants. Tables belong to pgcite_owner; tenant roles may only read them, and only
-- the rows of tenants they belong to. Every write goes through a SECURITY DEFINER function (owned by
-- pgcite_owner) that checks its caller first (rag._authorize). docs/security.md has the threat model.

-- pg_database_owner (the owner of this database, an administrator: rag._is_admin) reads what readers read.
GRANT USAGE ON SCHEMA rag TO pgcite_reader, pgcite_owner, pg_database_owner;

-- Direct reads. Not the embedding or the text search vector of chunks: an ORDER BY embedding or a tsv
-- match on rag.chunk would let EXPLAIN ANALYZE count other tenants' rows that the policy filtered out.
GRANT SELECT ON rag.tenant, rag.tenant_member, rag.document, rag.term, rag.ask_log, rag.log_head,
rag.config, rag.settings, rag.context TO pgcite_reader, pg_database_owner;
GRANT SELECT (
    chunk_id, tenant, document_id, doc_key, doc_version, chunk_index, anchor, section_path, title, content,
    content_hash, token_count, model, ts_config, created_at, retired_at
) ON rag.chunk TO pgcite_reader, pg_database_owner;

-- Membership rows: a role sees those that make it a member (a live role, under the name it was granted to);
-- admins see all. Built-ins only, so the tenant policy below can consult this table without recursion.
DROP POLICY IF EXISTS member_read ON rag.tenant_member;
CREATE POLICY member_read ON rag.tenant_member FOR SELECT
USING (
    pg_catalog.pg_has_role(current_user, 'pgcite_admin', 'MEMBER')
    OR pg_catalog.pg_has_role(current_user, 'pg_database_owner', 'MEMBER')
    OR EXISTS (
        SELECT FROM pg_catalog.pg_roles AS r
        WHERE
            r.oid = tenant_member.member_role AND r.rolname = tenant_member.member_name
            AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
    )
);

DROP POLICY IF EXISTS tenant_read ON rag.tenant;
CREATE POLICY tenant_read ON rag.tenant FOR SELECT
USING (
    pg_catalog.pg_has_role(current_user, 'pgcite_admin', 'MEMBER')
    OR pg_catalog.pg_has_role(current_user, 'pg_database_owner', 'MEMBER')
    OR EXISTS (
        SELECT FROM rag.tenant_member AS m
        WHERE m.tenant = tenant.tenant
    )
);

DROP POLICY IF EXISTS document_tenant ON rag.document;
CREATE POLICY document_tenant ON rag.document FOR SELECT
USING (tenant = any((SELECT rag._my_tenants())::text[]));

DROP POLICY IF EXISTS chunk_tenant ON rag.chunk;
CREATE POLICY chunk_tenant ON rag.chunk FOR SELECT
USING (tenant = any((SELECT rag._my_tenants())::text[]));

DROP POLICY IF EXISTS term_tenant ON rag.term;
CREATE POLICY term_tenant ON rag.term FOR SELECT
USING (tenant = any((SELECT rag._my_tenants())::text[]));

DROP POLICY IF EXISTS ask_log_tenant ON rag.ask_log;
CREATE POLICY ask_log_tenant ON rag.ask_log FOR SELECT
USING (tenant = any((SELECT rag._my_tenants())::text[]));

DROP POLICY IF EXISTS log_head_tenant ON rag.log_head;
CREATE POLICY log_head_tenant ON rag.log_head FOR SELECT
USING (tenant = any((SELECT rag._my_tenants())::text[]));

DROP POLICY IF EXISTS context_tenant ON rag.context;
CREATE POLICY context_tenant ON rag.context FOR SELECT
USING (tenant = any((SELECT rag._my_tenants())::text[]));

-- rag.generator has no policy and no grant: only pgcite's functions read it (rag.generators lists it).

-- Settings are no secret (rag.settings shows them to readers); they are written only by rag.set_config.
DROP POLICY IF EXISTS config_read ON rag.config;
CREATE POLICY config_read ON rag.config FOR SELECT USING (true);

DROP POLICY IF EXISTS document_key_tenant ON rag.document_key;
CREATE POLICY document_key_tenant ON rag.document_key FOR SELECT
USING (tenant = any((SELECT rag._my_tenants())::text[]));

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

-- The audit log is append-only. The one update allowed is sealing: an unsealed entry (seq NULL) gets its
-- place in the chain (seq, prev_hash, row_hash) and nothing else changes.
CREATE OR REPLACE FUNCTION rag._ask_log_append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    unchained rag.ask_log;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        unchained := NEW;
        unchained.seq := OLD.seq;
        unchained.prev_hash := OLD.prev_hash;
        unchained.row_hash := OLD.row_hash;
        IF OLD.seq IS NULL AND NEW.seq IS NOT NULL AND NEW.row_hash IS NOT NULL
            AND unchained IS NOT DISTINCT FROM OLD THEN
            RETURN NEW;
        END IF;
    END IF;
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

-- No statistics on columns that carry tenant data: pg_stats shows a column's most common values and histogram
-- to every role that may SELECT the column, whatever row level security hides, and the planner's estimates
-- (EXPLAIN) reveal them too. Without them the planner assumes default selectivities; pgcite's own queries
-- run on indexes led by tenant either way.
DO $nostats$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT a.attrelid::regclass AS rel, a.attname, a.attrelid, a.attnum
        FROM pg_catalog.pg_attribute AS a
        INNER JOIN pg_catalog.pg_class AS r ON r.oid = a.attrelid
        WHERE r.relnamespace = 'rag'::regnamespace AND r.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
            AND a.atttypid IN ('text'::regtype, 'name'::regtype, 'jsonb'::regtype, 'bytea'::regtype,
                'regrole'::regtype, 'text[]'::regtype, 'bigint[]'::regtype, 'regconfig'::regtype)
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I SET STATISTICS 0', c.rel, c.attname);
        DELETE FROM pg_catalog.pg_statistic AS s WHERE s.starelid = c.attrelid AND s.staattnum = c.attnum;
    END LOOP;
END
$nostats$;
