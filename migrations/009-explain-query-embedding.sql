-- 0.5.0: rag.explain takes the question's embedding like rag.ask and rag.retrieve (a client that embeds
-- questions itself, e.g. where pgcite_python is not installed, can explain too). The old signatures go;
-- sql/core/082-explain.sql creates the new ones.
DROP FUNCTION IF EXISTS rag.explain(text, text, integer);
DROP FUNCTION IF EXISTS rag._explain(name, text, text, integer);
