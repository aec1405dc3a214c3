-- "Newest first" is the order of submission: (created_at, id), the id breaking ties. One index
-- serves it, and a page of a past date range starts at the range's end instead of walking back
-- from the newest task through every task submitted since (256.8 ms at ten million tasks for a
-- range ending 30 days ago, docs/BENCHMARKS.md). It replaces the index on created_at alone, which
-- every query that used it can use as well.
CREATE INDEX tasks_created_id_idx ON tasks (created_at, id);
DROP INDEX tasks_created_idx;
