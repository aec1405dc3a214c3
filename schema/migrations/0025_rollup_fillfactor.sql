-- The rollup rows a filter without dates reads (the all-time and month rows) are updated by every
-- fold, and at a full page each update moved the row to another page and added an entry to every
-- index: a million tasks' 1,300 all-time rows per customer were spread over 2,200 pages behind 5,800
-- index entries after one drain, and their read went through all of them. With room left in each
-- page an update stays on its page (a HOT update, no index entry), so the rows a read takes
-- together stay together; the tables are rewritten once in key order (grain and bucket first), and
-- vacuumed after 2% of their rows changed rather than 20%.
ALTER TABLE task_rollups SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02);
ALTER TABLE task_rollup_bins SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02);
CLUSTER task_rollups USING task_rollups_key;
CLUSTER task_rollup_bins USING task_rollup_bins_key;
