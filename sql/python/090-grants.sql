-- The internal functions this extension added follow the same grants as the core's.
SELECT rag._apply_grants();
