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

-- name: grant_default_tables
-- Tables and views that later migrations create (by {owner}) are readable and writable by the principal too.
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {principal};

-- name: grant_default_sequences
-- Sequences that later migrations create (by {owner}) give the principal ids too.
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
GRANT USAGE, SELECT ON SEQUENCES TO {principal};

-- name: grant_current_schema_one
-- The schema the queue's objects live in (the connection's search path), and who is connected.
SELECT current_schema() AS schema, current_user AS owner;

-- name: grant_role_exists_one
-- Whether the principal has a Postgres role yet.
SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %(role)s) AS present;

-- name: grant_lakebase_one
-- Lakebase has the databricks_auth extension: its roles for Databricks identities are made by it.
SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'databricks_auth') AS lakebase;

-- name: grant_role_create
-- Plain Postgres: a login role for the principal (its password or other authentication is set apart).
CREATE ROLE {principal} LOGIN;

-- name: grant_lakebase_extension
-- Lakebase: the extension whose function makes roles for Databricks identities.
CREATE EXTENSION IF NOT EXISTS databricks_auth;

-- name: grant_lakebase_role_create
-- Lakebase: a role for a service principal, named by its application id, that logs in with OAuth tokens.
SELECT databricks_create_role({application_id}, 'SERVICE_PRINCIPAL');
