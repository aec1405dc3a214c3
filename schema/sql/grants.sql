-- name: grant_targets_list
-- The queue's tables, views and sequences in the schema it lives in, for explicit grants.
SELECT c.relname AS name,
       CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' WHEN 'm' THEN 'view' ELSE 'table' END AS kind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
ORDER BY kind, c.relname;

-- name: grant_schema_usage
-- Lets the principal see the queue's schema (schema and principal: identifiers composed by the caller).
GRANT USAGE ON SCHEMA {schema} TO {principal};

-- name: grant_table_rw
-- Reads and writes rows of one queue table: claims, callbacks, operator actions.
GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {table} TO {principal};

-- name: grant_view_read
-- Reads one view of the queue.
GRANT SELECT ON TABLE {table} TO {principal};

-- name: grant_sequence_use
-- Takes ids from one sequence (identity columns).
GRANT USAGE, SELECT ON SEQUENCE {table} TO {principal};

-- name: grant_current_schema_one
-- The schema the queue's objects live in (the connection's search path).
SELECT current_schema() AS schema;
