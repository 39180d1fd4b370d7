-- Runs once when the container's cluster is created.
CREATE EXTENSION IF NOT EXISTS pgcite_python CASCADE;
