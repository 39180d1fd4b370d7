-- 0.9.0 (issue #10, session 21): rag.chunk_tsv holds each live chunk's tenant too, and a tenant's own partial GIN
-- index of its tsvectors (rag._index_tenants, named by rag._tenant_fts_index_name) is built on rag.chunk_tsv
-- instead of rag.chunk: the full-text leg of such a tenant then reads its candidates' chunk ids and tsvectors from
-- the narrow rows in one scan (rag._candidates), where it read the wide rows of rag.chunk for the ids and then
-- rag.chunk_tsv by primary key for the tsvectors. An existing tenant index on rag.chunk is built again on
-- rag.chunk_tsv (same name, same tenant).
ALTER TABLE rag.chunk_tsv ADD COLUMN tenant text;
UPDATE rag.chunk_tsv AS v SET tenant = c.tenant
FROM rag.chunk AS c
WHERE c.chunk_id = v.chunk_id;
ALTER TABLE rag.chunk_tsv ALTER COLUMN tenant SET NOT NULL;
COMMENT ON COLUMN rag.chunk_tsv.tenant IS
'The chunk''s tenant: the predicate of a tenant''s own GIN index of tsvectors (rag._index_tenants).';
DO $do$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT x.tenant, i.relname AS name
        FROM rag.tenant AS x
        INNER JOIN pg_catalog.pg_class AS i
            ON i.relnamespace = 'rag'::regnamespace
            AND i.relname = 'chunk_tsv_' || pg_catalog.left(pg_catalog.md5(x.tenant), 20)
        INNER JOIN pg_catalog.pg_index AS ix ON ix.indexrelid = i.oid AND ix.indrelid = 'rag.chunk'::regclass
        ORDER BY x.tenant
    LOOP
        EXECUTE pg_catalog.format('DROP INDEX rag.%I', t.name);
        EXECUTE pg_catalog.format(
            'CREATE INDEX %I ON rag.chunk_tsv USING gin (tsv) WHERE tenant = %L', t.name, t.tenant
        );
    END LOOP;
END
$do$;
