-- 0.9.0 (issue #10, session 24): the title leg reads each of its best titles' chunks in the leg's own order
-- (doc_key, chunk_index, chunk_id), only the first p_depth of each (rag._candidates). Through chunk_title_idx
-- (tenant, title) it read every chunk of those titles to sort them: a title such as "Parameters" or
-- "Description" heads 12,000-15,000 of the largest tenant's chunks at 1M (9.6 ms for one such title, 24 ms
-- for two, against 0.1-0.9 ms now). The title is keyed by its 64-bit hash (rag._candidates tests the title
-- itself on the row): a title may have 2,400 bytes, a new doc_key 2,048 (rag._lock_document), and an entry
-- must stay under the B-tree's 2,704 bytes. At 1M chunks 73 MB (chunk_title_idx, which it replaces, 10 MB).
-- A key stored before 0.9.0 may be longer (up to ~2,680 bytes that did not compress): such chunks are in a
-- second index, by (tenant, title) as before, so that no stored document keeps this update from running.
CREATE INDEX chunk_title_order_idx ON rag.chunk (
    tenant, pg_catalog.hashtextextended(title, 0), doc_key, chunk_index, chunk_id
) WHERE retired_at IS NULL AND pg_catalog.octet_length(doc_key) <= 2048;
CREATE INDEX chunk_title_long_key_idx ON rag.chunk (tenant, title)
WHERE retired_at IS NULL AND pg_catalog.octet_length(doc_key) > 2048;
DROP INDEX rag.chunk_title_idx;
