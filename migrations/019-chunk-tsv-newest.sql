-- 0.9.0 (issue #10, session 24): a tenant's live chunks newest first, for the full-text leg of a question whose
-- rarest lexeme is in a large share of the tenant (rag._candidates). Its candidates are the newest fts_budget
-- chunks matching that lexeme (or the two rarest): through GIN that meant fetching every match to sort them
-- (54,107 rows, 41 ms, for "parameters" in a 350,000-chunk tenant), where reading the tenant's newest rows and
-- testing each finds the same ones in a few thousand (1.2 ms). Narrow keys (tenant, chunk id): no entry comes
-- near the B-tree's 2,704 bytes that the tenant's name (at most 63 bytes) does not already bound.
CREATE INDEX chunk_tsv_tenant_newest_idx ON rag.chunk_tsv (tenant, chunk_id);
