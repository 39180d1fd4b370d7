-- 0.3.0: the privilege model (docs/security.md).
-- * Tables, sequences and the functions that write belong to pgcite_owner, a NOLOGIN role that is not a
--   superuser. Tenant roles (pgcite_reader, pgcite_writer) and pgcite_admin hold no INSERT, UPDATE or DELETE
--   on any rag table: every write goes through a SECURITY DEFINER function that checks its caller.
-- * Membership is stored as a role (regrole: an OID, dumped and restored by name) plus the name it had when
--   granted; a dropped role's rows never match again, and a new role with the same name is not a member.
-- * Serialisation uses row locks on rows that only pgcite_owner can lock (rag.document_key, rag.log_head),
--   never advisory keys that any role can take.
-- * The audit log is appended without waiting for other sessions: an ask inserts its entry with its own
--   hash (entry_hash); the chain (seq, prev_hash, row_hash) is sealed later, in order, by whoever holds the
--   tenant's rag.log_head row. The head (last seq and hash) lives outside the log, so deleting the log's
--   tail is detected.
-- * Settings that shape answers or choose code are read from rag.config (written by rag.set_config) or the
--   server's configuration, never from a session.

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'pgcite_owner') THEN
        CREATE ROLE pgcite_owner NOLOGIN NOINHERIT;
    END IF;
END
$roles$;

-- ---------------------------------------------------------------- membership by role, not by name
ALTER TABLE rag.tenant_member ADD COLUMN member_role regrole;
UPDATE rag.tenant_member AS m SET member_role = pg_catalog.to_regrole(m.member::text);
DELETE FROM rag.tenant_member AS m
WHERE m.member_role IS NULL;  -- roles dropped under 0.2.0
-- the name the role had when it was granted (the stored text was regrole output: quoted where needed)
UPDATE rag.tenant_member AS m SET member = r.rolname
FROM pg_catalog.pg_roles AS r
WHERE r.oid = m.member_role;
ALTER TABLE rag.tenant_member DROP CONSTRAINT tenant_member_pkey;
ALTER TABLE rag.tenant_member RENAME COLUMN member TO member_name;
ALTER TABLE rag.tenant_member ALTER COLUMN member_role SET NOT NULL;
ALTER TABLE rag.tenant_member ADD PRIMARY KEY (tenant, member_role);
COMMENT ON TABLE rag.tenant_member IS
'Roles that may read (and, with pgcite_writer, write) a tenant, by OID and by the name the role had when it was '
'granted: a dropped role never matches again, nor does a new role that reuses its name. Inherited through grants.';

-- ---------------------------------------------------------------- one row per document key: the ingest lock
CREATE TABLE rag.document_key (
    tenant text NOT NULL REFERENCES rag.tenant (tenant),
    doc_key text NOT NULL,
    PRIMARY KEY (tenant, doc_key)
);
INSERT INTO rag.document_key (tenant, doc_key) SELECT DISTINCT
    d.tenant,
    d.doc_key
FROM rag.document AS d;
COMMENT ON TABLE rag.document_key IS
'Every document key of every tenant; writers of one key lock its row (two ingests of a key never interleave).';

-- ---------------------------------------------------------------- audit log: append without waiting, seal later
ALTER TABLE rag.ask_log ALTER COLUMN seq DROP NOT NULL;
ALTER TABLE rag.ask_log ALTER COLUMN row_hash DROP NOT NULL;
ALTER TABLE rag.ask_log ADD COLUMN entry_hash bytea;
COMMENT ON COLUMN rag.ask_log.entry_hash IS
'sha256 of the entry''s content (rag._log_entry_text), set when it is written. NULL: an entry of 0.2.0 or '
'earlier, whose row_hash covers its content directly.';
COMMENT ON COLUMN rag.ask_log.seq IS 'Position in the tenant''s chain; NULL until the entry is sealed.';
CREATE INDEX ask_log_unsealed_idx ON rag.ask_log (tenant, ask_id) WHERE seq IS NULL;
DROP TRIGGER IF EXISTS ask_log_chain ON rag.ask_log;
DROP FUNCTION IF EXISTS rag._ask_log_chain();

CREATE TABLE rag.log_head (
    tenant text PRIMARY KEY REFERENCES rag.tenant (tenant),
    seq bigint NOT NULL DEFAULT 0,
    row_hash bytea,
    sealed_at timestamptz
);
INSERT INTO rag.log_head (tenant, seq, row_hash)
SELECT
    t.tenant,
    coalesce(l.seq, 0) AS seq,
    l.row_hash
FROM rag.tenant AS t
LEFT JOIN LATERAL (
    SELECT
        a.seq,
        a.row_hash
    FROM rag.ask_log AS a
    WHERE a.tenant = t.tenant
    ORDER BY a.seq DESC LIMIT 1
) AS l ON TRUE;
COMMENT ON TABLE rag.log_head IS
'The head of each tenant''s audit chain (last sealed seq and its row_hash), kept outside rag.ask_log so that '
'deleting the log''s tail is detected by rag.verify_log. Record rag.log_head(tenant) outside the database too.';

-- ---------------------------------------------------------------- settings only an administrator can change
CREATE TABLE rag.config (
    name text PRIMARY KEY,
    value text NOT NULL,
    set_by name NOT NULL,
    set_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE rag.config IS
'Settings of this database''s pgcite, written only by rag.set_config (pgcite_admin; code paths: superuser). '
'They win over the server configuration (postgresql.conf pgcite.*); sessions cannot change either.';

SELECT pg_catalog.pg_extension_config_dump('rag.document_key', '');
SELECT pg_catalog.pg_extension_config_dump('rag.log_head', '');
SELECT pg_catalog.pg_extension_config_dump('rag.config', '');
ALTER TABLE rag.document_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.log_head ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag.config ENABLE ROW LEVEL SECURITY;

-- ---------------------------------------------------------------- policies that allowed direct writes
DROP POLICY IF EXISTS member_admin ON rag.tenant_member;
DROP POLICY IF EXISTS tenant_model ON rag.tenant;
DROP POLICY IF EXISTS tenant_admin ON rag.tenant;
DROP POLICY IF EXISTS ask_log_append ON rag.ask_log;

-- ---------------------------------------------------------------- owner of tables and sequences
REVOKE ALL ON rag.tenant, rag.tenant_member, rag.document, rag.chunk, rag.term, rag.ask_log
FROM pgcite_reader, pgcite_writer, pgcite_admin;
ALTER TABLE rag.tenant OWNER TO pgcite_owner;
ALTER TABLE rag.tenant_member OWNER TO pgcite_owner;
ALTER TABLE rag.document OWNER TO pgcite_owner;
ALTER TABLE rag.chunk OWNER TO pgcite_owner;
ALTER TABLE rag.term OWNER TO pgcite_owner;
ALTER TABLE rag.ask_log OWNER TO pgcite_owner;
ALTER TABLE rag.document_key OWNER TO pgcite_owner;
ALTER TABLE rag.log_head OWNER TO pgcite_owner;
ALTER TABLE rag.config OWNER TO pgcite_owner;

-- ---------------------------------------------------------------- functions whose signature or result changed
DROP FUNCTION IF EXISTS rag._tenant_exists(text);
DROP FUNCTION IF EXISTS rag._answer_settings();
DROP FUNCTION IF EXISTS rag._check_document(text, text, text);
DROP FUNCTION IF EXISTS rag._lock_document(text, text, bytea);
DROP FUNCTION IF EXISTS rag._store_version(
    text, text, bytea, text, text, text, jsonb, integer, text, rag.chunk_input[]
);
DROP FUNCTION IF EXISTS rag._correct_question(text, text);
DROP FUNCTION IF EXISTS rag._prepare_question(text, text, integer, public.vector);
DROP FUNCTION IF EXISTS rag._candidates(text, text, public.vector, integer);
DROP FUNCTION IF EXISTS rag._gate_thresholds(rag.tenant);
DROP FUNCTION IF EXISTS rag._answer(text, text, text, integer, public.vector, jsonb);
DROP FUNCTION IF EXISTS rag.verify_log(text);
