-- 0.5.0: rag.explain takes the question's embedding like rag.ask and rag.retrieve (a client that embeds
-- questions itself, e.g. where pgcite_python is not installed, can explain too). The old signatures go;
-- sql/core/082-explain.sql creates the new ones. CASCADE: any role may create a view over a function it can name
-- (a temporary one in any database), and without it a reader's view over the old rag.explain made the upgrade
-- fail for as long as the view existed (docs/security.md "Upgrades a tenant role cannot hold up").
DROP FUNCTION IF EXISTS rag.explain(text, text, integer) CASCADE;
DROP FUNCTION IF EXISTS rag._explain(name, text, text, integer) CASCADE;
