-- 0.2.0: rag.calibrate's result gained the column `names` (a changed result type cannot be replaced, only
-- recreated).
DROP FUNCTION IF EXISTS rag.calibrate(text, jsonb, float8);
