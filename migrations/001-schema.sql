-- Run-once DDL for pgcite 0.1.0: roles, tables, indexes.
-- (0.4.0: every function, operator and operator class below is schema-qualified, as 0.1.0 resolved them: a
-- trusted install runs with the installing owner's schema public in search_path; docs/security.md.)
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
        pg_catalog.tsvector_concat(
            pg_catalog.setweight(pg_catalog.to_tsvector(ts_config, title), 'A'::"char"),
            pg_catalog.setweight(pg_catalog.to_tsvector(ts_config, content), 'D'::"char")
        )
    ) STORED,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    retired_at timestamptz,
    UNIQUE (tenant, doc_key, doc_version, chunk_index)
);
COMMENT ON TABLE rag.chunk IS
'Immutable chunk rows: a chunk_id means the same text forever. Only retired_at may be set, once.';

CREATE INDEX chunk_embedding_hnsw_idx ON rag.chunk USING hnsw (embedding public.vector_cosine_ops);
CREATE INDEX chunk_content_trgm_idx ON rag.chunk USING gin (content public.gin_trgm_ops);
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
CREATE INDEX term_trgm_idx ON rag.term USING gin (term public.gin_trgm_ops);
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
