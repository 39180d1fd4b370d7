-- generated from migrations/ and sql/core/ by extension/Makefile; do not edit
\echo Use "CREATE EXTENSION pgcite CASCADE" to load this file. \quit

-- ===== migrations/000-prerequisites.sql
-- pgcite refers to pgvector's and pg_trgm's objects as public.* (PostgreSQL 15 has no @extschema:name@),
-- so both must live in schema public, where CREATE EXTENSION ... CASCADE puts them by default.
DO $check$
DECLARE
    misplaced text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.format('%s (in schema %s)', e.extname, n.nspname), ', ')
    INTO misplaced
    FROM pg_catalog.pg_extension AS e
    INNER JOIN pg_catalog.pg_namespace AS n ON n.oid = e.extnamespace
    WHERE e.extname IN ('vector', 'pg_trgm') AND n.nspname <> 'public';
    IF misplaced IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'pgcite needs the extensions vector and pg_trgm in schema public: ' || misplaced,
            HINT = 'ALTER EXTENSION vector SET SCHEMA public; ALTER EXTENSION pg_trgm SET SCHEMA public;';
    END IF;
END
$check$;

-- ===== migrations/001-schema.sql
-- Run-once DDL for pgcite 0.1.0: roles, tables, indexes.
-- Idempotent objects (functions, policies, grants) live in sql/core/ and run after this file.

-- ---------------------------------------------------------------- roles (cluster-wide; created once)
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgcite_reader') THEN
        CREATE ROLE pgcite_reader NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgcite_writer') THEN
        CREATE ROLE pgcite_writer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgcite_admin') THEN
        CREATE ROLE pgcite_admin NOLOGIN;
    END IF;
    IF NOT pg_catalog.pg_has_role('pgcite_writer', 'pgcite_reader', 'MEMBER') THEN
        GRANT pgcite_reader TO pgcite_writer;
    END IF;
    IF NOT pg_catalog.pg_has_role('pgcite_admin', 'pgcite_writer', 'MEMBER') THEN
        GRANT pgcite_writer TO pgcite_admin;
    END IF;
END
$roles$;

-- ---------------------------------------------------------------- tenants and membership
CREATE TABLE rag.tenant (
    tenant text PRIMARY KEY
    CONSTRAINT tenant_name_format CHECK (tenant ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
    ts_config regconfig NOT NULL DEFAULT 'pg_catalog.english',
    model text,
    gate jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE rag.tenant IS
'One row per tenant: its text search configuration, the embedding model its corpus uses and its gate thresholds.';

CREATE TABLE rag.tenant_member (
    tenant text NOT NULL REFERENCES rag.tenant (tenant) ON DELETE CASCADE,
    member name NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (tenant, member)
);
COMMENT ON TABLE rag.tenant_member IS
'Roles that may read (and, with pgcite_writer, write) a tenant. Membership is inherited through role grants.';

-- ---------------------------------------------------------------- documents and chunks
CREATE TABLE rag.document (
    document_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text NOT NULL REFERENCES rag.tenant (tenant),
    doc_key text NOT NULL,
    version integer NOT NULL CHECK (version > 0),
    content_hash bytea NOT NULL,
    title text,
    source_url text,
    metadata jsonb NOT NULL DEFAULT '{}',
    format text NOT NULL CHECK (format IN ('html', 'markdown', 'text', 'chunks')),
    chunk_count integer NOT NULL,
    empty_sections integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    retired_at timestamptz,
    UNIQUE (tenant, doc_key, version)
);
CREATE UNIQUE INDEX document_current_idx ON rag.document (tenant, doc_key) WHERE retired_at IS NULL;
COMMENT ON TABLE rag.document IS
'Every version of every document. A new version retires the previous one; rows are never deleted.';

CREATE TABLE rag.chunk (
    chunk_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text NOT NULL REFERENCES rag.tenant (tenant),
    document_id bigint NOT NULL REFERENCES rag.document (document_id),
    doc_key text NOT NULL,
    doc_version integer NOT NULL,
    chunk_index integer NOT NULL CHECK (chunk_index >= 0),
    anchor text,
    section_path text NOT NULL DEFAULT '',
    title text NOT NULL DEFAULT '',
    content text NOT NULL CHECK (content <> ''),
    content_hash bytea NOT NULL,
    token_count integer NOT NULL,
    embedding public.vector(384) NOT NULL,
    model text NOT NULL,
    ts_config regconfig NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector(ts_config, title), 'A') || setweight(to_tsvector(ts_config, content), 'D')
    ) STORED,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    retired_at timestamptz,
    UNIQUE (tenant, doc_key, doc_version, chunk_index)
);
COMMENT ON TABLE rag.chunk IS
'Immutable chunk rows: a chunk_id means the same text forever. Only retired_at may be set, once.';

CREATE INDEX chunk_embedding_hnsw_idx ON rag.chunk USING hnsw (embedding vector_cosine_ops);
CREATE INDEX chunk_content_trgm_idx ON rag.chunk USING gin (content gin_trgm_ops);
CREATE INDEX chunk_tsv_idx ON rag.chunk USING gin (tsv);
CREATE INDEX chunk_doc_idx ON rag.chunk (tenant, doc_key, doc_version);
CREATE INDEX chunk_active_idx ON rag.chunk (tenant) WHERE retired_at IS NULL;
CREATE INDEX chunk_hash_idx ON rag.chunk (tenant, content_hash);

-- Vocabulary per tenant, for typo correction of question words with pg_trgm.
CREATE TABLE rag.term (
    tenant text NOT NULL REFERENCES rag.tenant (tenant),
    term text NOT NULL,
    PRIMARY KEY (tenant, term)
);
CREATE INDEX term_trgm_idx ON rag.term USING gin (term gin_trgm_ops);
COMMENT ON TABLE rag.term IS 'Words seen in a tenant''s chunks; questions are spell-corrected against it.';

-- ---------------------------------------------------------------- audit log
CREATE TABLE rag.ask_log (
    ask_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text NOT NULL REFERENCES rag.tenant (tenant),
    seq bigint NOT NULL,
    role_name name NOT NULL,
    asked_at timestamptz NOT NULL,
    question text NOT NULL,
    k integer NOT NULL,
    options jsonb NOT NULL,
    settings jsonb NOT NULL,
    model text,
    query_embedding_supplied boolean NOT NULL,
    query_embedding public.vector(384),
    chunk_ids bigint[] NOT NULL,
    status text NOT NULL,
    reason text,
    answer text,
    citations jsonb NOT NULL,
    evidence jsonb NOT NULL,
    timings jsonb NOT NULL,
    fingerprint text NOT NULL,
    prev_hash bytea,
    row_hash bytea NOT NULL,
    UNIQUE (tenant, seq)
);
COMMENT ON TABLE rag.ask_log IS
'Append-only record of every rag.ask, hash-chained per tenant (rag.verify_log checks the chain).';

-- pg_dump keeps the user data of these tables
SELECT pg_catalog.pg_extension_config_dump('rag.tenant', '');
SELECT pg_catalog.pg_extension_config_dump('rag.tenant_member', '');
SELECT pg_catalog.pg_extension_config_dump('rag.document', '');
SELECT pg_catalog.pg_extension_config_dump('rag.chunk', '');
SELECT pg_catalog.pg_extension_config_dump('rag.term', '');
SELECT pg_catalog.pg_extension_config_dump('rag.ask_log', '');

ALTER TABLE rag.tenant ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.tenant_member ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.document ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.chunk ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.term ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.ask_log ENABLE ROW LEVEL SECURITY;

SELECT pg_catalog.pg_extension_config_dump('rag.document_document_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('rag.chunk_chunk_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('rag.ask_log_ask_id_seq', '');

-- One parsed chunk on its way into rag.chunk (rag.ingest and rag.store_document build arrays of these).
CREATE TYPE rag.chunk_input AS (
    anchor text,
    section_path text,
    title text,
    content text,
    token_count integer,
    embedding public.vector (384)
);

-- ===== sql/core/000-access.sql
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

-- ===== sql/core/010-security.sql
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

-- ===== sql/core/020-tenant.sql
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

-- ===== sql/core/030-store.sql
-- Store: a parsed, embedded document becomes an immutable version of chunk rows.
-- rag.ingest (pgcite_python) parses and embeds inside PostgreSQL and calls rag._store_version;
-- rag.store_document is the same path for callers that chunk and embed outside (no PL/Python).

CREATE OR REPLACE FUNCTION rag._check_document(p_tenant text, p_doc_key text, p_body text)
RETURNS rag.tenant
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(p_tenant);
    max_bytes bigint := rag._setting('pgcite.max_document_bytes', 20 * 1024 * 1024)::bigint;
BEGIN
    IF p_doc_key IS NULL OR pg_catalog.btrim(p_doc_key) = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'doc_key must not be NULL or empty',
            HINT = 'Give every document a stable key, such as its path or URL.';
    END IF;
    IF p_body IS NULL OR pg_catalog.btrim(p_body, E' \t\n\r\f\v') = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('document "%s" is empty', p_doc_key),
            HINT = 'To remove a document use rag.delete_document(tenant, doc_key).';
    END IF;
    IF pg_catalog.octet_length(p_body) > max_bytes THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('document "%s" is %s bytes, over the limit of %s bytes',
                p_doc_key, pg_catalog.octet_length(p_body), max_bytes),
            HINT = 'Split the document, or raise the setting pgcite.max_document_bytes.';
    END IF;
    RETURN t;
END
$fn$;
COMMENT ON FUNCTION rag._check_document(text, text, text) IS
'Internal: validates tenant, key and body of a document before anything is written.';

-- Claims the tenant's embedding model on first use; a different model later is an error.
CREATE OR REPLACE FUNCTION rag._claim_model(p_tenant text, p_model text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    current_model text;
BEGIN
    PERFORM rag._require_tenant(p_tenant);
    UPDATE rag.tenant SET model = p_model WHERE tenant = p_tenant AND model IS NULL;
    SELECT model INTO current_model FROM rag.tenant WHERE tenant = p_tenant;
    IF current_model <> p_model THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = pg_catalog.format('tenant "%s" is embedded with model "%s", not "%s"',
                p_tenant, current_model, p_model),
            HINT = 'A corpus never mixes models: set pgcite.model back, or re-embed into a new tenant.';
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._claim_model(text, text) IS
'Internal: records the tenant''s embedding model on first ingest; 55000 if a different one is used later.';

CREATE OR REPLACE FUNCTION rag._document_hash(
    p_body text, p_format text, p_title text, p_source_url text, p_metadata jsonb
)
RETURNS bytea
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.sha256(pg_catalog.convert_to(
        pg_catalog.concat_ws(E'\x1f', p_format, p_title, p_source_url, p_metadata::text, p_body), 'UTF8'))
$fn$;
COMMENT ON FUNCTION rag._document_hash(text, text, text, text, jsonb) IS
'Internal: the hash that decides whether a re-ingested document is unchanged.';

-- The text that is embedded for a chunk, and the hash by which its embedding is reused.
CREATE OR REPLACE FUNCTION rag._embed_text(p_title text, p_content text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN coalesce(p_title, '') = '' THEN p_content ELSE p_title || E'\n\n' || p_content END
$fn$;
COMMENT ON FUNCTION rag._embed_text(text, text) IS
'Internal: the text embedded for a chunk (title, blank line, content).';

-- Serialises writers of one document (two sessions ingesting the same key never interleave) and
-- tells whether the current version already has this hash.
CREATE OR REPLACE FUNCTION rag._lock_document(p_tenant text, p_doc_key text, p_hash bytea)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(
        pg_catalog.hashtextextended(p_tenant || E'\x1f' || p_doc_key, 7411));
    RETURN EXISTS (
        SELECT FROM rag.document AS d
        WHERE d.tenant = p_tenant AND d.doc_key = p_doc_key AND d.retired_at IS NULL AND d.content_hash = p_hash
    );
END
$fn$;
COMMENT ON FUNCTION rag._lock_document(text, text, bytea) IS
'Internal: locks one document key for this transaction; true when its current version has this hash.';

CREATE OR REPLACE FUNCTION rag._store_version(
    p_tenant text, p_doc_key text, p_hash bytea, p_format text, p_title text, p_source_url text,
    p_metadata jsonb, p_empty_sections integer, p_model text, p_chunks rag.chunk_input[]
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(p_tenant);
    prev rag.document;
    new_version integer;
    new_id bigint;
    n integer := coalesce(pg_catalog.cardinality(p_chunks), 0);
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.unnest(p_chunks) AS c WHERE c.embedding IS NULL
               OR coalesce(pg_catalog.btrim(c.content), '') = '') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'every chunk needs non-empty content and an embedding';
    END IF;
    PERFORM rag._claim_model(p_tenant, p_model);

    SELECT d.* INTO prev FROM rag.document AS d
    WHERE d.tenant = p_tenant AND d.doc_key = p_doc_key AND d.retired_at IS NULL;
    SELECT coalesce(max(d.version), 0) + 1 INTO new_version FROM rag.document AS d
    WHERE d.tenant = p_tenant AND d.doc_key = p_doc_key;

    IF prev.document_id IS NOT NULL THEN
        UPDATE rag.document AS d SET retired_at = pg_catalog.now() WHERE d.document_id = prev.document_id;
        UPDATE rag.chunk AS c SET retired_at = pg_catalog.now()
        WHERE c.document_id = prev.document_id AND c.retired_at IS NULL;
    END IF;

    INSERT INTO rag.document AS d (
        tenant, doc_key, version, content_hash, title, source_url, metadata, format, chunk_count, empty_sections
    )
    VALUES (p_tenant, p_doc_key, new_version, p_hash, p_title, p_source_url, coalesce(p_metadata, '{}'),
            p_format, n, coalesce(p_empty_sections, 0))
    RETURNING d.document_id INTO new_id;

    INSERT INTO rag.chunk (
        tenant, document_id, doc_key, doc_version, chunk_index, anchor, section_path, title, content,
        content_hash, token_count, embedding, model, ts_config
    )
    SELECT p_tenant, new_id, p_doc_key, new_version, (c.ord - 1)::integer, c.anchor,
           coalesce(c.section_path, ''), coalesce(c.title, ''), c.content,
           pg_catalog.sha256(pg_catalog.convert_to(rag._embed_text(c.title, c.content), 'UTF8')),
           coalesce(c.token_count, 0), c.embedding, p_model, t.ts_config
    FROM pg_catalog.unnest(p_chunks) WITH ORDINALITY AS c (
        anchor, section_path, title, content, token_count, embedding, ord
    );

    INSERT INTO rag.term (tenant, term)
    SELECT DISTINCT p_tenant, w.term
    FROM pg_catalog.unnest(p_chunks) AS c,
        pg_catalog.regexp_split_to_table(pg_catalog.lower(c.title || ' ' || c.content), '[^[:alnum:]_]+') AS w (term)
    WHERE pg_catalog.length(w.term) BETWEEN 3 AND 40 AND w.term !~ '^[0-9_]+$'
    ON CONFLICT DO NOTHING;

    -- A document whose sections are all empty (a table of contents) is recorded, with no chunks, as 'empty'.
    RETURN QUERY SELECT p_doc_key, new_version,
        CASE WHEN n = 0 THEN 'empty' WHEN prev.document_id IS NULL THEN 'inserted' ELSE 'updated' END, n,
        coalesce(p_empty_sections, 0);
END
$fn$;
COMMENT ON FUNCTION rag._store_version(
    text, text, bytea, text, text, text, jsonb, integer, text, rag.chunk_input[]
) IS
'Internal: writes a new document version and its chunks, retiring the previous version. Caller holds the lock.';

CREATE OR REPLACE FUNCTION rag.store_document(
    tenant text, key text, items jsonb, title text DEFAULT NULL, source_url text DEFAULT NULL,
    metadata jsonb DEFAULT '{}'
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p_tenant text := store_document.tenant;
    p_key text := store_document.key;
    body_hash bytea;
    rows_in rag.chunk_input [];
BEGIN
    IF store_document.items IS NULL OR pg_catalog.jsonb_typeof(store_document.items) <> 'array'
        OR pg_catalog.jsonb_array_length(store_document.items) = 0 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'items must be a non-empty JSON array of chunks',
            HINT = 'Each element: {"content": ..., "embedding": [384 numbers], "title", "anchor", "section_path"}.';
    END IF;
    PERFORM rag._check_document(p_tenant, p_key, store_document.items::text);
    body_hash := rag._document_hash(store_document.items::text, 'chunks', store_document.title,
        store_document.source_url, store_document.metadata);
    IF rag._lock_document(p_tenant, p_key, body_hash) THEN
        RETURN QUERY SELECT d.doc_key, d.version, 'unchanged'::text, d.chunk_count, d.empty_sections
        FROM rag.document AS d WHERE d.tenant = p_tenant AND d.doc_key = p_key AND d.retired_at IS NULL;
        RETURN;
    END IF;
    BEGIN
        SELECT pg_catalog.array_agg(ROW(
            e ->> 'anchor', e ->> 'section_path', coalesce(e ->> 'title', ''), e ->> 'content',
            coalesce((e ->> 'token_count')::integer, 0), (e -> 'embedding')::text::public.vector(384)
        )::rag.chunk_input ORDER BY o)
        INTO rows_in
        FROM pg_catalog.jsonb_array_elements(store_document.items) WITH ORDINALITY AS x (e, o);
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'a chunk''s embedding is not a vector of 384 numbers',
            DETAIL = SQLERRM;
    END;
    RETURN QUERY SELECT * FROM rag._store_version(p_tenant, p_key, body_hash, 'chunks', store_document.title,
        store_document.source_url, store_document.metadata, 0, rag.model_name(), rows_in);
END
$fn$;
COMMENT ON FUNCTION rag.store_document(text, text, jsonb, text, text, jsonb) IS
'Stores a document chunked and embedded outside PostgreSQL (no PL/Python needed): items is a JSON array of '
'{content, embedding[384], title, anchor, section_path, token_count}. Same versioning as rag.ingest.';

CREATE OR REPLACE FUNCTION rag.delete_document(tenant text, doc_key text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    doc_id bigint;
BEGIN
    PERFORM rag._require_tenant(delete_document.tenant);
    PERFORM rag._lock_document(delete_document.tenant, delete_document.doc_key, ''::bytea);
    UPDATE rag.document AS d SET retired_at = pg_catalog.now()
    WHERE d.tenant = delete_document.tenant AND d.doc_key = delete_document.doc_key AND d.retired_at IS NULL
    RETURNING d.document_id INTO doc_id;
    IF doc_id IS NULL THEN
        RETURN false;
    END IF;
    UPDATE rag.chunk AS c SET retired_at = pg_catalog.now() WHERE c.document_id = doc_id AND c.retired_at IS NULL;
    RETURN true;
END
$fn$;
COMMENT ON FUNCTION rag.delete_document(text, text) IS
'Retires the current version of a document: its chunks stay (old citations and audit records still resolve) '
'but are never retrieved again. False when there was no current version.';

REVOKE ALL ON FUNCTION rag.store_document(text, text, jsonb, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION rag.delete_document(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.store_document(text, text, jsonb, text, text, jsonb) TO pgcite_writer;
GRANT EXECUTE ON FUNCTION rag.delete_document(text, text) TO pgcite_writer;

-- ===== sql/core/040-retrieve.sql
-- Retrieve: three legs (vector, full text, trigram) fused by reciprocal rank fusion, with a total order.
-- Every ordering ends in (doc_key, chunk_index, chunk_id) and every score is rounded before it orders,
-- so float noise, plans, VACUUM and REINDEX cannot change the result.

CREATE OR REPLACE FUNCTION rag._check_question(question text, k integer)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF k IS NULL OR k < 1 OR k > 100 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('k must be between 1 and 100, not %s', coalesce(k::text, 'NULL'));
    END IF;
    IF pg_catalog.length(question) > 4000 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('question is %s characters, over the limit of 4000',
                pg_catalog.length(question)),
            HINT = 'Ask a shorter question: retrieval works on the gist, not on whole documents.';
    END IF;
    RETURN question IS NOT NULL AND pg_catalog.btrim(question, E' \t\n\r\f\v') <> '';
END
$fn$;
COMMENT ON FUNCTION rag._check_question(text, integer) IS
'Internal: 22023 for k outside 1..100, 54000 for a question over 4000 characters; false when it is empty.';

-- The question's embedding: the caller's (checked), or computed once in-database by rag.embed
-- (of the typo-corrected question when a word was corrected: MiniLM cannot read "vacum").
CREATE OR REPLACE FUNCTION rag._query_embedding(question text, corrected text, query_embedding public.vector)
RETURNS public.vector
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v public.vector;
BEGIN
    IF query_embedding IS NOT NULL THEN
        IF public.vector_dims(query_embedding) <> 384 THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = pg_catalog.format('query_embedding has %s dimensions, expected 384',
                    public.vector_dims(query_embedding)),
                HINT = 'Embed the question with all-MiniLM-L6-v2 (384 dimensions), or pass NULL.';
        END IF;
        RETURN query_embedding;
    END IF;
    IF pg_catalog.to_regprocedure('rag.embed(text)') IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'no query_embedding given and in-database embedding is not installed',
            HINT = 'Pass query_embedding (all-MiniLM-L6-v2, 384 dims) or CREATE EXTENSION pgcite_python.';
    END IF;
    EXECUTE 'SELECT rag.embed($1)' INTO v USING rag._embedding_text(question, corrected);
    RETURN v;
END
$fn$;
COMMENT ON FUNCTION rag._query_embedding(text, text, public.vector) IS
'Internal: checks a supplied query embedding (22023 unless 384 dims) or embeds the question once.';

-- Question words the tenant's corpus does not know are replaced by the closest known word (pg_trgm),
-- so "vacum freeze" searches for "vacuum freeze". Words under 4 letters and numbers are kept as they are.
CREATE OR REPLACE FUNCTION rag._correct_question(p_tenant text, p_question text)
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(pg_catalog.string_agg(coalesce(fix.term, w.word), ' ' ORDER BY w.n), '')
    FROM pg_catalog.regexp_matches(pg_catalog.lower(p_question), '[[:alnum:]_]+', 'g') WITH ORDINALITY AS m (a, n)
    CROSS JOIN LATERAL (SELECT m.a[1] AS word, m.n) AS w
    LEFT JOIN LATERAL (
        SELECT t.term
        FROM rag.term AS t
        WHERE
            pg_catalog.length(w.word) >= 4
            AND w.word !~ '^[0-9_]+$'
            AND NOT EXISTS (SELECT FROM rag.term AS k WHERE k.tenant = p_tenant AND k.term = w.word)
            AND t.tenant = p_tenant
            AND t.term OPERATOR(public.%) w.word
            AND public.similarity(t.term, w.word) >= rag._setting('pgcite.typo_similarity', 0.5)
        ORDER BY public.similarity(t.term, w.word) DESC, t.term
        LIMIT 1
    ) AS fix ON true
$fn$;
COMMENT ON FUNCTION rag._correct_question(text, text) IS
'Internal: the question in lower case with unknown words replaced by the nearest word of the tenant''s corpus.';

-- The text embedded for a question: the corrected question if a word was corrected, else the question.
CREATE OR REPLACE FUNCTION rag._embedding_text(p_question text, p_corrected text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN p_corrected = x.plain THEN p_question ELSE p_corrected END
    FROM (
        SELECT coalesce(pg_catalog.string_agg(m.a[1], ' ' ORDER BY m.n), '') AS plain
        FROM pg_catalog.regexp_matches(pg_catalog.lower(p_question), '[[:alnum:]_]+', 'g') WITH ORDINALITY
            AS m (a, n)
    ) AS x
$fn$;
COMMENT ON FUNCTION rag._embedding_text(text, text) IS
'Internal: the question as it is embedded (typo-corrected when a word was unknown to the tenant''s corpus).';

-- websearch syntax, but terms are OR-ed (a natural question rarely has every word in one chunk);
-- a query with a negation keeps its AND semantics.
CREATE OR REPLACE FUNCTION rag._fts_query(p_config regconfig, p_text text)
RETURNS tsquery
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE
        WHEN q::text LIKE '%!%' THEN q
        ELSE pg_catalog.replace(q::text, ' & ', ' | ')::tsquery
    END
    FROM pg_catalog.websearch_to_tsquery(p_config, p_text) AS q
$fn$;
COMMENT ON FUNCTION rag._fts_query(regconfig, text) IS
'Internal: websearch_to_tsquery with its AND turned into OR, unless the query negates a term.';

-- What every entry point does first: check k and the question's length, check the tenant (42704/42501),
-- correct the question's spelling and embed it once. has_question is false for an empty question.
CREATE OR REPLACE FUNCTION rag._prepare_question(
    question text, tenant text, k integer, query_embedding public.vector,
    OUT has_question boolean, OUT corrected text, OUT qemb public.vector
)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    has_question := rag._check_question(question, k);
    PERFORM rag._require_tenant(tenant);
    IF has_question THEN
        corrected := rag._correct_question(tenant, question);
        qemb := rag._query_embedding(question, corrected, query_embedding);
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._prepare_question(text, text, integer, public.vector) IS
'Internal: validates k, question and tenant, then corrects and embeds the question once.';

-- Every candidate of every leg with its per-leg rank and score and the fused score, in total order.
CREATE OR REPLACE FUNCTION rag._candidates(p_tenant text, p_corrected text, p_qemb public.vector, p_depth integer)
RETURNS TABLE (
    fused_rank integer, chunk_id bigint, doc_key text, chunk_index integer,
    vec_rank integer, distance float8, fts_rank integer, fts_score float8,
    trgm_rank integer, trgm_score float8, fused_score float8
)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(p_tenant);
    corrected text := p_corrected;
    q tsquery := rag._fts_query(t.ts_config, corrected);
    rrf_k float8 := rag._setting('pgcite.rrf_k', 5);
    w_vec float8 := rag._setting('pgcite.weight_vector', 1.0);
    w_fts float8 := rag._setting('pgcite.weight_fts', 0.2);
    w_trgm float8 := rag._setting('pgcite.weight_trgm', 0.1);
    min_title float8 := rag._setting('pgcite.min_title_similarity', 0.5);
    exact_limit bigint := rag._setting('pgcite.exact_search_limit', 20000)::bigint;
    n_active bigint;
    ann_ids bigint [];
BEGIN
    SELECT count(*) INTO n_active FROM rag.chunk AS c WHERE c.tenant = p_tenant AND c.retired_at IS NULL;
    IF n_active > exact_limit THEN
        -- Large tenant: HNSW with pgvector's iterative scan, so the tenant filter never starves the
        -- result; over-fetch, then every candidate is re-scored exactly below.
        PERFORM pg_catalog.set_config('hnsw.iterative_scan', 'relaxed_order', true);
        PERFORM pg_catalog.set_config('hnsw.ef_search', greatest(100, p_depth * 4)::text, true);
        SELECT pg_catalog.array_agg(a.chunk_id) INTO ann_ids FROM (
            SELECT c.chunk_id FROM rag.chunk AS c
            WHERE c.tenant = p_tenant AND c.retired_at IS NULL
            ORDER BY c.embedding OPERATOR(public.<=>) p_qemb
            LIMIT p_depth * 2
        ) AS a;
        IF coalesce(pg_catalog.cardinality(ann_ids), 0) < least(n_active, p_depth) THEN
            ann_ids := NULL;  -- the index could not deliver enough rows: fall back to exact search
        END IF;
    END IF;

    RETURN QUERY
    WITH vec AS (
        SELECT v.chunk_id, v.d,
            pg_catalog.row_number() OVER (ORDER BY v.d, v.doc_key, v.chunk_index, v.chunk_id)::integer AS r
        FROM (
            SELECT c.chunk_id, c.doc_key, c.chunk_index,
                round((c.embedding OPERATOR(public.<=>) p_qemb)::numeric, 6)::float8 AS d
            FROM rag.chunk AS c
            WHERE c.tenant = p_tenant AND c.retired_at IS NULL
                AND (ann_ids IS NULL OR c.chunk_id = ANY (ann_ids))
            ORDER BY d, c.doc_key, c.chunk_index, c.chunk_id
            LIMIT p_depth
        ) AS v
    ),
    fts AS (
        SELECT f.chunk_id, f.s,
            pg_catalog.row_number() OVER (ORDER BY f.s DESC, f.doc_key, f.chunk_index, f.chunk_id)::integer AS r
        FROM (
            SELECT c.chunk_id, c.doc_key, c.chunk_index,
                round(pg_catalog.ts_rank_cd(c.tsv, q, 1)::numeric, 6)::float8 AS s
            FROM rag.chunk AS c
            WHERE c.tenant = p_tenant AND c.retired_at IS NULL AND c.tsv @@ q
            ORDER BY s DESC, c.doc_key, c.chunk_index, c.chunk_id
            LIMIT p_depth
        ) AS f
    ),
    trgm AS (
        SELECT g.chunk_id, g.s,
            pg_catalog.row_number() OVER (ORDER BY g.s DESC, g.doc_key, g.chunk_index, g.chunk_id)::integer AS r
        FROM (
            SELECT c.chunk_id, c.doc_key, c.chunk_index,
                round(public.word_similarity(
                    pg_catalog.regexp_replace(c.title, '^[0-9A-Z]*[0-9.]+\s+', ''), corrected)::numeric, 6
                )::float8 AS s
            FROM rag.chunk AS c
            WHERE c.tenant = p_tenant AND c.retired_at IS NULL AND c.title <> ''
            ORDER BY s DESC, c.doc_key, c.chunk_index, c.chunk_id
            LIMIT p_depth
        ) AS g
        WHERE g.s >= min_title
    ),
    fused AS (
        SELECT ids.chunk_id,
            vec.r AS vr, vec.d, fts.r AS fr, fts.s AS fs, trgm.r AS tr, trgm.s AS ts,
            round((
                coalesce(w_vec / (rrf_k + vec.r), 0)
                + coalesce(w_fts / (rrf_k + fts.r), 0)
                + coalesce(w_trgm / (rrf_k + trgm.r), 0)
            )::numeric, 9)::float8 AS fused
        FROM (SELECT vec.chunk_id FROM vec UNION SELECT fts.chunk_id FROM fts UNION SELECT trgm.chunk_id FROM trgm)
            AS ids
        LEFT JOIN vec ON vec.chunk_id = ids.chunk_id
        LEFT JOIN fts ON fts.chunk_id = ids.chunk_id
        LEFT JOIN trgm ON trgm.chunk_id = ids.chunk_id
    )
    SELECT
        pg_catalog.row_number() OVER (ORDER BY f.fused DESC, c.doc_key, c.chunk_index, c.chunk_id)::integer,
        c.chunk_id, c.doc_key, c.chunk_index,
        f.vr,
        coalesce(f.d, round((c.embedding OPERATOR(public.<=>) p_qemb)::numeric, 6)::float8),
        f.fr, f.fs, f.tr, f.ts, f.fused
    FROM fused AS f
    INNER JOIN rag.chunk AS c ON c.chunk_id = f.chunk_id
    ORDER BY f.fused DESC, c.doc_key, c.chunk_index, c.chunk_id;
END
$fn$;
COMMENT ON FUNCTION rag._candidates(text, text, public.vector, integer) IS
'Internal: candidates of the vector, full-text and title-trigram legs (p_depth each) for a spell-corrected '
'question, fused by weighted '
'reciprocal rank fusion, in total order. Settings pgcite.rrf_k, pgcite.weight_*, pgcite.exact_search_limit.';

CREATE OR REPLACE FUNCTION rag.retrieve(
    question text, tenant text, k integer DEFAULT 8, query_embedding public.vector DEFAULT NULL
)
RETURNS TABLE (
    rank integer, chunk_id bigint, doc_key text, doc_version integer, chunk_index integer, anchor text,
    title text, content text, distance float8, trgm_score float8, fts_score float8, fused_score float8
)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p record;
BEGIN
    p := rag._prepare_question(retrieve.question, retrieve.tenant, retrieve.k, retrieve.query_embedding);
    IF NOT p.has_question THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.fused_rank, c.chunk_id, c.doc_key, c.doc_version, c.chunk_index, c.anchor, c.title, c.content,
        x.distance, x.trgm_score, x.fts_score, x.fused_score
    FROM rag._candidates(retrieve.tenant, p.corrected, p.qemb, greatest(retrieve.k * 4, 40)) AS x
    INNER JOIN rag.chunk AS c ON c.chunk_id = x.chunk_id
    WHERE x.fused_rank <= retrieve.k
    ORDER BY x.fused_rank;
END
$fn$;
COMMENT ON FUNCTION rag.retrieve(text, text, integer, public.vector) IS
'The k best chunks of a tenant for a question: vector (HNSW or exact), full-text and trigram legs fused by '
'reciprocal rank fusion, ties broken by (doc_key, chunk_index, chunk_id). Deterministic for a given corpus.';

GRANT EXECUTE ON FUNCTION rag.retrieve(text, text, integer, public.vector) TO pgcite_reader;

-- ===== sql/core/055-answer.sql
-- Answer: retrieve -> gate -> pick verbatim sentences -> compose "quote [n]" -> verify -> log.

-- The gate's threshold for a tenant: calibrated (rag.calibrate) over the setting over the default.
-- The gate score combines the evidence signals (see rag._answer), so one threshold suffices.
CREATE OR REPLACE FUNCTION rag._gate_thresholds(p_tenant rag.tenant)
RETURNS jsonb
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.jsonb_build_object(
        'min_score', coalesce((p_tenant.gate ->> 'min_score')::float8, rag._setting('pgcite.min_score', 0.5)),
        'source', CASE
            WHEN p_tenant.gate ? 'min_score' THEN 'calibrated'
            WHEN coalesce(pg_catalog.current_setting('pgcite.min_score', true), '') <> '' THEN 'setting'
            ELSE 'default'
        END
    )
$fn$;
COMMENT ON FUNCTION rag._gate_thresholds(rag.tenant) IS
'Internal: the gate threshold of a tenant (calibrated, else setting pgcite.min_score, else 0.5).';

-- Sentences of the passages scored lexically in SQL: the fallback when pgcite_python is not installed.
CREATE OR REPLACE FUNCTION rag._lexical_sentences(p_config regconfig, p_query tsquery, p_passages jsonb)
RETURNS jsonb
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
        'chunk_id', (p.value ->> 'chunk_id')::bigint, 'quote', s.sentence, 'sim', NULL,
        'score', round(pg_catalog.ts_rank(pg_catalog.to_tsvector(p_config, s.sentence), p_query)::numeric, 6)
    )), '[]')
    FROM pg_catalog.jsonb_array_elements(p_passages) AS p,
        pg_catalog.regexp_split_to_table(p.value ->> 'content', '(?<=[.!?])\s+(?=[A-Z0-9])|\n\s*\n') AS s (sentence)
    WHERE pg_catalog.length(pg_catalog.btrim(s.sentence)) >= 20
$fn$;
COMMENT ON FUNCTION rag._lexical_sentences(regconfig, tsquery, jsonb) IS
'Internal: sentences of passages scored by ts_rank against the question (used without pgcite_python).';

-- The whole answer pipeline for one question, without logging (rag.ask logs, rag.replay compares).
CREATE OR REPLACE FUNCTION rag._answer(
    p_question text, p_corrected text, p_tenant text, p_k integer, p_qemb public.vector, p_options jsonb
)
RETURNS TABLE (status text, answer text, reason text, citations jsonb, evidence jsonb, chunk_ids bigint[])
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(p_tenant);
    corrected text := p_corrected;
    q tsquery := rag._fts_query(t.ts_config, corrected);
    thresholds jsonb := rag._gate_thresholds(t);
    max_quotes integer := coalesce((p_options ->> 'max_quotes')::integer, 2);
    n_passages integer := coalesce((p_options ->> 'passages')::integer, 3);
    margin float8 := coalesce((p_options ->> 'quote_margin')::float8, 0.08);
    rank_penalty float8 := coalesce((p_options ->> 'rank_penalty')::float8, 0.1);
    ranked jsonb;
    ids bigint [];
    n_visible bigint;
    best_sim float8;
    coverage float8;
    best_sentence float8;
    gate_score float8;
    passages jsonb;
    scored jsonb;
    picked jsonb;
    draft text;
    draft_citations jsonb;
    v record;
    gate jsonb;
    fingerprint text;
    failed text [] := '{}';
BEGIN
    IF max_quotes NOT BETWEEN 1 AND 10 OR n_passages NOT BETWEEN 1 AND 20 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'options.max_quotes must be 1..10 and options.passages 1..20';
    END IF;

    SELECT
        coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
            'rank', x.fused_rank, 'chunk_id', x.chunk_id, 'doc_key', x.doc_key, 'chunk_index', x.chunk_index,
            'anchor', c.anchor, 'title', c.title, 'distance', x.distance, 'vec_rank', x.vec_rank,
            'fts_rank', x.fts_rank, 'fts_score', x.fts_score, 'trgm_rank', x.trgm_rank, 'trgm_score', x.trgm_score,
            'fused_score', x.fused_score
        ) ORDER BY x.fused_rank), '[]'),
        pg_catalog.array_agg(x.chunk_id ORDER BY x.fused_rank),
        max(1 - x.distance),
        pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
            coalesce(pg_catalog.string_agg(x.chunk_id || ':' || x.fused_score, ',' ORDER BY x.fused_rank), ''),
            'UTF8')), 'hex')
    INTO ranked, ids, best_sim, fingerprint
    FROM rag._candidates(p_tenant, corrected, p_qemb, greatest(p_k * 4, 40)) AS x
    INNER JOIN rag.chunk AS c ON c.chunk_id = x.chunk_id
    WHERE x.fused_rank <= p_k;

    SELECT count(*) INTO n_visible FROM rag.chunk AS c WHERE c.tenant = p_tenant AND c.retired_at IS NULL;

    -- Share of the question's words (after typo correction) that the top passages contain.
    SELECT coalesce(avg((EXISTS (
        SELECT FROM rag.chunk AS c
        WHERE c.chunk_id = ANY (ids[1:n_passages]) AND c.tsv @@ pg_catalog.quote_literal(l.lexeme)::tsquery
    ))::integer), 0)
    INTO coverage
    FROM pg_catalog.unnest(pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(t.ts_config, corrected))) AS l (lexeme);

    SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('chunk_id', c.chunk_id, 'content', c.content)
        ORDER BY o.n), '[]')
    INTO passages
    FROM pg_catalog.unnest(ids[1:n_passages]) WITH ORDINALITY AS o (chunk_id, n)
    INNER JOIN rag.chunk AS c ON c.chunk_id = o.chunk_id;

    IF pg_catalog.to_regprocedure('rag._score_sentences(text,public.vector,jsonb)') IS NOT NULL THEN
        EXECUTE 'SELECT rag._score_sentences($1, $2, $3)' INTO scored USING p_question, p_qemb, passages;
        SELECT coalesce(pg_catalog.jsonb_agg(s || pg_catalog.jsonb_build_object('quote',
            pg_catalog.substr(c.content, (s ->> 'start')::integer + 1, (s ->> 'end')::integer - (s ->> 'start')::integer)
        )), '[]')
        INTO scored
        FROM pg_catalog.jsonb_array_elements(scored) AS s
        INNER JOIN rag.chunk AS c ON c.chunk_id = (s ->> 'chunk_id')::bigint;
        SELECT max((s ->> 'sim')::float8) INTO best_sentence FROM pg_catalog.jsonb_array_elements(scored) AS s;
    ELSE
        scored := rag._lexical_sentences(t.ts_config, q, passages);
    END IF;

    -- Gate: the score is the geometric mean of the signals that exist (similarity of the best chunk, share
    -- of the question's words in the top passages, similarity of the best sentence), so one weak signal
    -- cannot be outvoted by the others; it must reach min_score.
    SELECT round(exp(avg(ln(greatest(x.v, 1e-6))))::numeric, 6)::float8
    INTO gate_score
    FROM (VALUES (coalesce(best_sim, 0)), (coverage), (best_sentence)) AS x (v)
    WHERE x.v IS NOT NULL;
    IF gate_score < (thresholds ->> 'min_score')::float8 THEN
        failed := failed || 'score'::text;
    END IF;
    gate := pg_catalog.jsonb_build_object(
        'signals', pg_catalog.jsonb_build_object(
            'score', gate_score, 'similarity', round(best_sim::numeric, 6), 'coverage', round(coverage::numeric, 6),
            'sentence', round(best_sentence::numeric, 6)),
        'thresholds', thresholds, 'failed', pg_catalog.to_jsonb(failed), 'passed', failed = '{}',
        'corrected_question', corrected);
    evidence := pg_catalog.jsonb_build_object(
        'chunks', ranked, 'gate', gate, 'complete', n_visible >= p_k, 'visible_chunks', n_visible,
        'fingerprint', fingerprint, 'sentence_scoring', CASE WHEN best_sentence IS NULL THEN 'lexical' ELSE 'minilm' END);
    chunk_ids := coalesce(ids, '{}');

    IF failed <> '{}' THEN
        status := 'abstained';
        reason := 'no_relevant_sources';
        citations := '[]';
        RETURN NEXT;
        RETURN;
    END IF;

    -- The best sentence, and those within margin of it, as verbatim quotes; sources numbered in order.
    -- A sentence's score is lowered by rank_penalty for each rank its chunk stands below the first, so the
    -- best-ranked source leads unless another has a clearly better sentence.
    WITH s0 AS (
        SELECT e.value AS j, (e.value ->> 'chunk_id')::bigint AS chunk_id,
            pg_catalog.array_position(ids, (e.value ->> 'chunk_id')::bigint) AS chunk_rank,
            coalesce((e.value ->> 'start')::integer, 0) AS start, (e.value ->> 'score')::float8 AS raw
        FROM pg_catalog.jsonb_array_elements(scored) AS e
    ),
    s AS (
        SELECT s0.*, round((s0.raw - rank_penalty * (s0.chunk_rank - 1))::numeric, 6)::float8 AS score FROM s0
    ),
    best AS (
        SELECT s.*, pg_catalog.row_number() OVER (ORDER BY s.score DESC, s.chunk_rank, s.start) AS r
        FROM s
    ),
    chosen AS (
        SELECT b.* FROM best AS b
        WHERE b.r <= max_quotes AND b.score >= (SELECT max(score) FROM s) - margin
    ),
    numbered AS (
        SELECT ch.*, pg_catalog.dense_rank() OVER (ORDER BY fc.first_r) AS n
        FROM chosen AS ch
        INNER JOIN (SELECT chosen.chunk_id, min(chosen.r) AS first_r FROM chosen GROUP BY chosen.chunk_id) AS fc
            ON fc.chunk_id = ch.chunk_id
    )
    SELECT
        pg_catalog.string_agg((numbered.j ->> 'quote') || ' [' || numbered.n || ']', ' ' ORDER BY numbered.r),
        pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
            'n', numbered.n, 'chunk_id', numbered.chunk_id, 'quote', numbered.j ->> 'quote') ORDER BY numbered.r)
    INTO draft, draft_citations
    FROM numbered;

    SELECT * INTO v FROM rag.verify(draft, draft_citations, ids);
    status := v.status;
    answer := v.answer;
    reason := v.reason;
    citations := v.citations;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag._answer(text, text, text, integer, public.vector, jsonb) IS
'Internal: retrieve, gate, pick and verify quotes for one question; no logging (rag.ask logs).';

-- ===== sql/core/060-verify.sql
-- Verify: every answer, whatever produced it, is checked before it is returned.
-- Each [n] must name a citation of a chunk retrieved in this call, each quote must occur in its chunk
-- (whitespace-normalised), and offsets are reported so substr(content, quote_start + 1,
-- quote_end - quote_start) = quote. Unknown or unverifiable citations are removed; nothing left -> abstain.

-- Regular expression matching a quote in its chunk with any run of white space standing for any other.
CREATE OR REPLACE FUNCTION rag._quote_pattern(quote text)
RETURNS text
LANGUAGE sql
IMMUTABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.regexp_replace(
        pg_catalog.regexp_replace(pg_catalog.btrim(quote, E' \t\n\r\f\v'), '([.^$*+?()\[\]{}|\\-])', '\\\1', 'g'),
        '\s+', '\\s+', 'g')
$fn$;
COMMENT ON FUNCTION rag._quote_pattern(text) IS
'Internal: a regular expression that finds a quote in a text whatever its white space.';

CREATE OR REPLACE FUNCTION rag.verify(answer_text text, cited jsonb, retrieved bigint[])
RETURNS TABLE (answer text, citations jsonb, status text, reason text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    checked jsonb;
    kept integer [];
    marker integer;
    out_answer text := verify.answer_text;
BEGIN
    IF verify.cited IS NOT NULL AND pg_catalog.jsonb_typeof(verify.cited) <> 'array' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'cited must be a JSON array of citations',
            HINT = 'Each element: {"n": 1, "chunk_id": 123, "quote": "..."}.';
    END IF;

    WITH given AS (
        SELECT e.o, e.c,
            CASE WHEN e.c ->> 'n' ~ '^[0-9]{1,6}$' THEN (e.c ->> 'n')::integer END AS n,
            CASE WHEN e.c ->> 'chunk_id' ~ '^[0-9]{1,18}$' THEN (e.c ->> 'chunk_id')::bigint END AS chunk_id,
            e.c ->> 'quote' AS quote
        FROM pg_catalog.jsonb_array_elements(coalesce(verify.cited, '[]')) WITH ORDINALITY AS e (c, o)
    ),
    located AS (
        SELECT g.o, g.n, g.chunk_id, ch.content, ch.doc_key, ch.doc_version, ch.chunk_index, ch.anchor,
            ch.title, d.source_url,
            CASE WHEN coalesce(pg_catalog.btrim(g.quote), '') <> '' AND ch.chunk_id IS NOT NULL
                THEN pg_catalog.regexp_instr(ch.content, rag._quote_pattern(g.quote)) END AS s,
            CASE WHEN coalesce(pg_catalog.btrim(g.quote), '') <> '' AND ch.chunk_id IS NOT NULL
                THEN pg_catalog.regexp_instr(ch.content, rag._quote_pattern(g.quote), 1, 1, 1) END AS e
        FROM given AS g
        LEFT JOIN rag.chunk AS ch ON ch.chunk_id = g.chunk_id AND g.chunk_id = ANY (verify.retrieved)
        LEFT JOIN rag.document AS d ON d.document_id = ch.document_id
        WHERE g.n IS NOT NULL
    )
    SELECT
        coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
            'n', l.n, 'chunk_id', l.chunk_id, 'doc_key', l.doc_key, 'doc_version', l.doc_version,
            'chunk_index', l.chunk_index, 'anchor', l.anchor, 'title', l.title, 'source_url', l.source_url,
            'quote', pg_catalog.substr(l.content, l.s, l.e - l.s), 'quote_start', l.s - 1, 'quote_end', l.e - 1,
            'verified', true
        ) ORDER BY l.n, l.o), '[]'),
        pg_catalog.array_agg(DISTINCT l.n)
    INTO checked, kept
    FROM located AS l
    WHERE l.s > 0 AND l.e > l.s
        AND out_answer LIKE '%[' || l.n || ']%';

    -- Markers of unknown or unverified sources are removed from the text.
    FOR marker IN
        SELECT DISTINCT m.a[1]::integer
        FROM pg_catalog.regexp_matches(coalesce(out_answer, ''), '\[([0-9]{1,6})\]', 'g') AS m (a)
    LOOP
        IF NOT (marker = ANY (coalesce(kept, '{}'))) THEN
            out_answer := pg_catalog.regexp_replace(out_answer, '\s*\[' || marker || '\]', '', 'g');
        END IF;
    END LOOP;

    IF pg_catalog.jsonb_array_length(checked) = 0 THEN
        RETURN QUERY SELECT NULL::text, '[]'::jsonb, 'abstained'::text, 'no_verifiable_quote'::text;
        RETURN;
    END IF;
    RETURN QUERY SELECT pg_catalog.btrim(out_answer), checked, 'answered'::text, NULL::text;
END
$fn$;
COMMENT ON FUNCTION rag.verify(text, jsonb, bigint[]) IS
'Checks an answer against the chunks retrieved for it: keeps cited entries {n, chunk_id, quote} whose chunk is in '
'retrieved and whose quote occurs in it (white space normalised), with exact offsets; drops the rest and their '
'[n] markers. No verified citation left: status abstained, reason no_verifiable_quote.';

GRANT EXECUTE ON FUNCTION rag.verify(text, jsonb, bigint[]) TO pgcite_reader;

-- ===== sql/core/070-ask.sql
-- rag.ask: the one call. Validates, answers (rag._answer), logs to the hash-chained audit log.

-- Settings that change an answer; they are logged with every ask and restored by rag.replay.
CREATE OR REPLACE FUNCTION rag._answer_settings()
RETURNS jsonb
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(pg_catalog.jsonb_object_agg(s.name, pg_catalog.current_setting(s.name, true)), '{}')
    FROM pg_catalog.unnest(ARRAY[
        'pgcite.model', 'pgcite.rrf_k', 'pgcite.weight_vector', 'pgcite.weight_fts', 'pgcite.weight_trgm',
        'pgcite.min_title_similarity', 'pgcite.exact_search_limit', 'pgcite.typo_similarity',
        'pgcite.min_score'
    ]) AS s (name)
    WHERE coalesce(pg_catalog.current_setting(s.name, true), '') <> ''
$fn$;
COMMENT ON FUNCTION rag._answer_settings() IS 'Internal: the pgcite.* settings in force that shape an answer.';

CREATE OR REPLACE FUNCTION rag.ask(
    question text, tenant text, k integer DEFAULT 5, query_embedding public.vector DEFAULT NULL,
    options jsonb DEFAULT '{}'
)
RETURNS TABLE (ask_id bigint, status text, answer text, reason text, citations jsonb, evidence jsonb)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t0 timestamptz := pg_catalog.clock_timestamp();
    t1 timestamptz;
    t2 timestamptz;
    p record;
    t rag.tenant;
    r record;
    ids bigint [] := '{}';
    read_only boolean := pg_catalog.pg_is_in_recovery()
        OR pg_catalog.current_setting('transaction_read_only') = 'on';
    timings jsonb;
BEGIN
    IF ask.options IS NOT NULL AND pg_catalog.jsonb_typeof(ask.options) <> 'object' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'options must be a JSON object',
            HINT = 'For example {"max_quotes": 2, "passages": 3}.';
    END IF;
    p := rag._prepare_question(ask.question, ask.tenant, ask.k, ask.query_embedding);
    t := rag._require_tenant(ask.tenant);
    t1 := pg_catalog.clock_timestamp();

    IF NOT p.has_question THEN
        status := 'abstained';
        reason := 'empty_question';
        citations := '[]';
        evidence := pg_catalog.jsonb_build_object('chunks', '[]'::jsonb, 'complete', false,
            'fingerprint', pg_catalog.encode(pg_catalog.sha256(''::bytea), 'hex'));
    ELSE
        SELECT * INTO r FROM rag._answer(ask.question, p.corrected, ask.tenant, ask.k, p.qemb, coalesce(ask.options, '{}'));
        status := r.status;
        answer := r.answer;
        reason := r.reason;
        citations := r.citations;
        evidence := r.evidence;
        ids := r.chunk_ids;
    END IF;
    t2 := pg_catalog.clock_timestamp();
    timings := pg_catalog.jsonb_build_object(
        'embed_ms', round((extract(EPOCH FROM coalesce(t1, t0) - t0) * 1000)::numeric, 3),
        'answer_ms', round((extract(EPOCH FROM t2 - coalesce(t1, t0)) * 1000)::numeric, 3),
        'total_ms', round((extract(EPOCH FROM t2 - t0) * 1000)::numeric, 3));

    IF read_only THEN
        -- A hot standby (or read-only transaction) still answers; it cannot append to the log.
        evidence := evidence || '{"logged": false, "log_skipped": "read_only"}'::jsonb;
        ask_id := NULL;
    ELSE
        evidence := evidence || '{"logged": true}'::jsonb;
        INSERT INTO rag.ask_log AS l (
            tenant, seq, role_name, asked_at, question, k, options, settings, model, query_embedding_supplied,
            query_embedding, chunk_ids, status, reason, answer, citations, evidence, timings, fingerprint, row_hash
        )
        VALUES (
            ask.tenant, 0, current_user, t0, coalesce(ask.question, ''), ask.k, coalesce(ask.options, '{}'),
            rag._answer_settings(), t.model, ask.query_embedding IS NOT NULL, p.qemb,
            ids, status, reason, answer, citations, evidence, timings,
            evidence ->> 'fingerprint', ''::bytea
        )
        RETURNING l.ask_id INTO ask_id;
    END IF;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag.ask(text, text, integer, public.vector, jsonb) IS
'Answers a question from a tenant''s corpus with verified verbatim quotes, or abstains with a reason '
'(empty_question, no_relevant_sources, no_verifiable_quote). Always one row; logged to rag.ask_log. '
'options: max_quotes (2), passages (3), quote_margin (0.08), rank_penalty (0.1).';

GRANT EXECUTE ON FUNCTION rag.ask(text, text, integer, public.vector, jsonb) TO pgcite_reader;

-- ===== sql/core/080-audit.sql
-- Audit: the hash chain of rag.ask_log, its check, replay of a logged ask, and explain.

-- The canonical text of a log entry that its hash covers (jsonb text is deterministic; time as epoch).
CREATE OR REPLACE FUNCTION rag._log_payload(l rag.ask_log)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.jsonb_build_object(
        'ask_id', l.ask_id, 'tenant', l.tenant, 'seq', l.seq, 'role_name', l.role_name,
        'asked_at', extract(EPOCH FROM l.asked_at), 'question', l.question, 'k', l.k, 'options', l.options,
        'settings', l.settings, 'model', l.model, 'query_embedding_supplied', l.query_embedding_supplied,
        'query_embedding', l.query_embedding::text, 'chunk_ids', l.chunk_ids, 'status', l.status,
        'reason', l.reason, 'answer', l.answer, 'citations', l.citations, 'evidence', l.evidence,
        'timings', l.timings, 'fingerprint', l.fingerprint
    )::text
$fn$;
COMMENT ON FUNCTION rag._log_payload(rag.ask_log) IS 'Internal: the text a log entry''s hash covers.';

-- Before insert: position in the tenant's chain (seq), previous hash and this entry's hash.
-- The per-tenant advisory lock orders concurrent askers; (tenant, seq) is unique besides.
CREATE OR REPLACE FUNCTION rag._ask_log_chain()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    last rag.ask_log;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('rag.ask_log:' || NEW.tenant, 7411));
    SELECT l.* INTO last FROM rag.ask_log AS l WHERE l.tenant = NEW.tenant ORDER BY l.seq DESC LIMIT 1;
    NEW.seq := coalesce(last.seq, 0) + 1;
    NEW.prev_hash := last.row_hash;
    NEW.role_name := current_user;
    NEW.row_hash := pg_catalog.sha256(
        coalesce(NEW.prev_hash, ''::bytea) || pg_catalog.convert_to(rag._log_payload(NEW), 'UTF8'));
    RETURN NEW;
END
$fn$;

DROP TRIGGER IF EXISTS ask_log_chain ON rag.ask_log;
CREATE TRIGGER ask_log_chain BEFORE INSERT ON rag.ask_log
FOR EACH ROW EXECUTE FUNCTION rag._ask_log_chain();

CREATE OR REPLACE FUNCTION rag.verify_log(tenant text)
RETURNS TABLE (ok boolean, checked bigint, first_bad_ask_id bigint, problem text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    l rag.ask_log;
    prev bytea;
    expected_seq bigint := 1;
BEGIN
    PERFORM rag._require_tenant(verify_log.tenant);
    checked := 0;
    FOR l IN SELECT * FROM rag.ask_log AS a WHERE a.tenant = verify_log.tenant ORDER BY a.seq LOOP
        IF l.seq <> expected_seq THEN
            problem := pg_catalog.format('entry seq %s missing', expected_seq);
        ELSIF l.prev_hash IS DISTINCT FROM prev THEN
            problem := 'prev_hash does not match the previous entry';
        ELSIF l.row_hash <> pg_catalog.sha256(
            coalesce(l.prev_hash, ''::bytea) || pg_catalog.convert_to(rag._log_payload(l), 'UTF8')) THEN
            problem := 'row_hash does not match the entry''s content';
        END IF;
        IF problem IS NOT NULL THEN
            ok := false;
            first_bad_ask_id := l.ask_id;
            RETURN NEXT;
            RETURN;
        END IF;
        prev := l.row_hash;
        expected_seq := expected_seq + 1;
        checked := checked + 1;
    END LOOP;
    ok := true;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag.verify_log(text) IS
'Walks a tenant''s audit log in order and recomputes every hash: ok, entries checked, and the first entry '
'whose content, order or link was altered.';

CREATE OR REPLACE FUNCTION rag.replay(ask bigint)
RETURNS TABLE (
    ask_id bigint, identical boolean, fingerprint_then text, fingerprint_now text,
    chunks_then bigint[], chunks_now bigint[], citations_identical boolean, status_then text, status_now text
)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    l rag.ask_log;
    s record;
    r record;
BEGIN
    SELECT a.* INTO l FROM rag.ask_log AS a WHERE a.ask_id = replay.ask;
    IF NOT found THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_object',
            MESSAGE = pg_catalog.format('ask %s not found', replay.ask),
            HINT = 'Only asks of tenants you are a member of can be replayed.';
    END IF;
    PERFORM rag._require_tenant(l.tenant);
    -- the settings of the original ask, for this transaction only
    FOR s IN SELECT e.key, e.value FROM pg_catalog.jsonb_each_text(l.settings) AS e LOOP
        PERFORM pg_catalog.set_config(s.key, s.value, true);
    END LOOP;
    replay.ask_id := l.ask_id;
    fingerprint_then := l.fingerprint;
    chunks_then := l.chunk_ids;
    status_then := l.status;
    IF l.query_embedding IS NULL THEN
        fingerprint_now := pg_catalog.encode(pg_catalog.sha256(''::bytea), 'hex');
        chunks_now := '{}';
        status_now := l.status;
        citations_identical := true;
    ELSE
        SELECT * INTO r FROM rag._answer(l.question, rag._correct_question(l.tenant, l.question), l.tenant, l.k,
            l.query_embedding, l.options);
        fingerprint_now := r.evidence ->> 'fingerprint';
        chunks_now := r.chunk_ids;
        status_now := r.status;
        citations_identical := r.citations = l.citations;
    END IF;
    identical := fingerprint_now = fingerprint_then AND chunks_now = chunks_then AND citations_identical
        AND status_now = status_then;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag.replay(bigint) IS
'Re-runs a logged ask with its logged embedding, parameters and settings and reports whether the retrieved '
'chunks, fingerprint, status and citations are identical (they are while the corpus is unchanged).';

CREATE OR REPLACE FUNCTION rag.explain(question text, tenant text, k integer DEFAULT 5)
RETURNS TABLE (
    fused_rank integer, chunk_id bigint, doc_key text, anchor text, title text,
    vec_rank integer, distance float8, fts_rank integer, fts_score float8, trgm_rank integer, trgm_score float8,
    fused_score float8, cited boolean, dropped_by text
)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p record;
    r record;
BEGIN
    p := rag._prepare_question(explain.question, explain.tenant, explain.k, NULL);
    IF NOT p.has_question THEN
        RETURN;
    END IF;
    SELECT * INTO r FROM rag._answer(explain.question, p.corrected, explain.tenant, explain.k, p.qemb, '{}');
    RETURN QUERY
    SELECT x.fused_rank, x.chunk_id, x.doc_key, c.anchor, c.title, x.vec_rank, x.distance, x.fts_rank,
        x.fts_score, x.trgm_rank, x.trgm_score, x.fused_score,
        EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(r.citations) AS e
                WHERE (e ->> 'chunk_id')::bigint = x.chunk_id),
        CASE
            WHEN x.fused_rank > explain.k THEN 'rank_beyond_k'
            WHEN r.status = 'abstained' THEN 'gate:' || r.reason || coalesce(' ' || (r.evidence -> 'gate' ->> 'failed'), '')
            WHEN EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(r.citations) AS e
                         WHERE (e ->> 'chunk_id')::bigint = x.chunk_id) THEN NULL
            ELSE 'not_quoted'
        END
    FROM rag._candidates(explain.tenant, p.corrected, p.qemb, greatest(explain.k * 4, 40)) AS x
    INNER JOIN rag.chunk AS c ON c.chunk_id = x.chunk_id
    ORDER BY x.fused_rank;
END
$fn$;
COMMENT ON FUNCTION rag.explain(text, text, integer) IS
'Every candidate of every retrieval leg with its rank and score per leg, the fused order, whether it was cited '
'and what dropped it (rank_beyond_k, gate:<reason>, not_quoted).';

GRANT EXECUTE ON FUNCTION rag.verify_log(text) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.replay(bigint) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.explain(text, text, integer) TO pgcite_reader;

-- ===== sql/core/085-calibrate.sql
-- Calibrate: run labelled questions, choose the gate threshold that separates answerable from unanswerable
-- ones, store it for the tenant. Midpoint of the gap when they separate; otherwise the threshold with the
-- lowest cost, where a wrong answer costs false_answer_cost (default 2) wrong abstentions (ties: fewer wrong
-- answers, then the higher threshold), reported with the overlap.

CREATE OR REPLACE FUNCTION rag.calibrate(tenant text, questions jsonb, false_answer_cost float8 DEFAULT 2)
RETURNS TABLE (
    id text, kind text, answerable boolean, score float8, similarity float8, coverage float8, sentence float8,
    top_anchor text, expected_in_top_k boolean, answered_at_threshold boolean
)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(calibrate.tenant);
    q jsonb;
    p record;
    r record;
    n integer;
    i integer := 0;
    threshold float8;
    min_answerable float8;
    max_unanswerable float8;
    best record;
    decided jsonb;
BEGIN
    IF calibrate.questions IS NULL OR pg_catalog.jsonb_typeof(calibrate.questions) <> 'array' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'questions must be a JSON array',
            HINT = 'Each element: {"id": "q1", "question": "...", "expect": ["ANCHOR"], '
                || '"kind": "answerable" | "typo" | "out_of_corpus"}.';
    END IF;
    IF EXISTS (
        SELECT FROM pg_catalog.jsonb_array_elements(calibrate.questions) AS e
        WHERE pg_catalog.jsonb_typeof(e) <> 'object' OR coalesce(e ->> 'question', '') = ''
            OR coalesce(e ->> 'kind', '') NOT IN ('answerable', 'typo', 'out_of_corpus')
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'every question needs a non-empty "question" and a "kind" of answerable, typo or out_of_corpus';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(calibrate.questions) AS e
                   WHERE e ->> 'kind' <> 'out_of_corpus')
        OR NOT EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(calibrate.questions) AS e
                       WHERE e ->> 'kind' = 'out_of_corpus') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'calibration needs both answerable and out_of_corpus questions';
    END IF;
    IF calibrate.false_answer_cost IS NULL OR calibrate.false_answer_cost <= 0 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'false_answer_cost must be a positive number (a wrong answer costs that many wrong abstentions)';
    END IF;
    n := pg_catalog.jsonb_array_length(calibrate.questions);

    CREATE TEMP TABLE IF NOT EXISTS pg_temp.pgcite_calibration (
        ord integer, id text, kind text, answerable boolean, score float8, similarity float8, coverage float8,
        sentence float8, top_anchor text, expected_in_top_k boolean
    ) ON COMMIT DROP;
    TRUNCATE pg_temp.pgcite_calibration;

    FOR q IN SELECT e FROM pg_catalog.jsonb_array_elements(calibrate.questions) AS e LOOP
        i := i + 1;
        p := rag._prepare_question(q ->> 'question', calibrate.tenant, 5, NULL);
        SELECT * INTO r FROM rag._answer(q ->> 'question', p.corrected, calibrate.tenant, 5, p.qemb, '{}');
        INSERT INTO pg_temp.pgcite_calibration
        SELECT i, coalesce(q ->> 'id', i::text), q ->> 'kind', q ->> 'kind' <> 'out_of_corpus',
            (r.evidence -> 'gate' -> 'signals' ->> 'score')::float8,
            (r.evidence -> 'gate' -> 'signals' ->> 'similarity')::float8,
            (r.evidence -> 'gate' -> 'signals' ->> 'coverage')::float8,
            (r.evidence -> 'gate' -> 'signals' ->> 'sentence')::float8,
            r.evidence -> 'chunks' -> 0 ->> 'anchor',
            EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(r.evidence -> 'chunks') AS c,
                        pg_catalog.jsonb_array_elements_text(coalesce(q -> 'expect', '[]')) AS a
                    WHERE c ->> 'anchor' = a);
        IF i % 10 = 0 OR i = n THEN
            RAISE NOTICE 'calibrate: % of % questions', i, n;
        END IF;
    END LOOP;

    SELECT min(c.score) FILTER (WHERE c.answerable), max(c.score) FILTER (WHERE NOT c.answerable)
    INTO min_answerable, max_unanswerable
    FROM pg_temp.pgcite_calibration AS c;

    IF min_answerable > max_unanswerable THEN
        threshold := (min_answerable + max_unanswerable) / 2;
    ELSE
        -- candidate thresholds: midpoints between consecutive distinct scores, and the ends
        SELECT y.th, y.fa, y.fn
        INTO best
        FROM (
            SELECT x.th,
                (SELECT count(*) FROM pg_temp.pgcite_calibration AS c
                 WHERE c.answerable AND c.score < x.th) AS fa,
                (SELECT count(*) FROM pg_temp.pgcite_calibration AS c
                 WHERE NOT c.answerable AND c.score >= x.th) AS fn
            FROM (
                SELECT (s.score + coalesce(pg_catalog.lead(s.score) OVER (ORDER BY s.score), s.score + 0.001)) / 2
                    AS th
                FROM (SELECT DISTINCT c.score FROM pg_temp.pgcite_calibration AS c) AS s
            ) AS x
        ) AS y
        ORDER BY y.fa + calibrate.false_answer_cost * y.fn, y.fn, y.th DESC
        LIMIT 1;
        threshold := best.th;
    END IF;
    threshold := round(threshold::numeric, 6)::float8;

    decided := pg_catalog.jsonb_build_object(
        'min_score', threshold,
        'separable', min_answerable > max_unanswerable,
        'gap', round((min_answerable - max_unanswerable)::numeric, 6),
        'false_abstain', (SELECT count(*) FROM pg_temp.pgcite_calibration AS c WHERE c.answerable AND c.score < threshold),
        'false_answer',
        (SELECT count(*) FROM pg_temp.pgcite_calibration AS c WHERE NOT c.answerable AND c.score >= threshold),
        'questions', n,
        'false_answer_cost', calibrate.false_answer_cost,
        'calibrated_on', (SELECT pg_catalog.jsonb_agg(c.id ORDER BY c.ord) FROM pg_temp.pgcite_calibration AS c),
        'calibrated_at', pg_catalog.now(),
        'calibrated_by', current_user
    );
    UPDATE rag.tenant AS tt SET gate = decided WHERE tt.tenant = calibrate.tenant;
    IF NOT found THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'only pgcite_admin (or a superuser) can store a tenant''s calibration';
    END IF;
    IF min_answerable > max_unanswerable THEN
        RAISE NOTICE 'calibrate: separable; gap % ; min_score = % (midpoint)',
            round((min_answerable - max_unanswerable)::numeric, 4), threshold;
    ELSE
        RAISE NOTICE 'calibrate: overlap of % ; min_score = % (lowest cost: % wrong answers, % wrong abstentions)',
            round((max_unanswerable - min_answerable)::numeric, 4), threshold,
            decided ->> 'false_answer', decided ->> 'false_abstain';
    END IF;
    RAISE NOTICE 'calibrate: these questions must not be used to score this tenant (see rag.tenant.gate.calibrated_on)';

    RETURN QUERY
    SELECT c.id, c.kind, c.answerable, c.score, c.similarity, c.coverage, c.sentence, c.top_anchor,
        c.expected_in_top_k, c.score >= threshold
    FROM pg_temp.pgcite_calibration AS c
    ORDER BY c.ord;
END
$fn$;
COMMENT ON FUNCTION rag.calibrate(text, jsonb, float8) IS
'Runs labelled questions [{id, question, expect, kind}] against a tenant, chooses its gate threshold '
'(midpoint of the gap between answerable and out_of_corpus scores, or the lowest cost when they overlap, a wrong '
'answer costing false_answer_cost wrong abstentions), '
'stores it in rag.tenant.gate with the ids used, and returns the table it decided from. Needs pgcite_admin.';

REVOKE ALL ON FUNCTION rag.calibrate(text, jsonb, float8) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.calibrate(text, jsonb, float8) TO pgcite_admin;

-- ===== sql/core/090-grants.sql
-- Internal functions (rag._*) are not for PUBLIC: readers get what asking needs, writers what storing needs.
-- pgcite_python calls this again for the functions it adds.
CREATE OR REPLACE FUNCTION rag._apply_grants()
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    f regprocedure;
    n integer := 0;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'rag'::regnamespace AND p.proname LIKE '\_%' AND p.prokind = 'f'
            AND p.prorettype <> 'trigger'::regtype AND p.proname <> '_apply_grants'
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        IF f::text LIKE 'rag._store_version(%' OR f::text LIKE 'rag._claim_model(%' THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pgcite_writer', f);
        ELSE
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pgcite_reader', f);
        END IF;
        n := n + 1;
    END LOOP;
    RETURN n;
END
$fn$;
REVOKE ALL ON FUNCTION rag._apply_grants() FROM PUBLIC;
COMMENT ON FUNCTION rag._apply_grants() IS
'Internal: revokes rag._* functions from PUBLIC and grants them to pgcite_reader (or pgcite_writer).';

SELECT rag._apply_grants();
