-- The dashboard's task table, and the counts and figures of a filter the rollups do not hold, read
-- from an index for each common filter instead of walking every newer task's row (schema.stats
-- composes each condition so that the planner can match it; docs/BENCHMARKS.md has the figures).
--
-- The table's order (newest submission first) walks this index back from the newest task. A page
-- of one agent's tasks, or of one status, read each task's row on the way to check it: 25 ms at a
-- million tasks when another agent had the newest 10,000, and about 100 ms a million tasks for an
-- agent with none. With the agent and the status in the index, the walk checks them in the index
-- itself (an index-only scan once the table is vacuumed): 2-5 ms, and 50 ms a million for an agent
-- with none. An index led by the agent was measured too and not kept: on PostgreSQL 15 the claim's
-- generic plan then fetched its candidates through it, every task of the agent, not by primary
-- key (the claim's CPU per task 125 -> 298 us).
DROP INDEX tasks_created_id_idx;
CREATE INDEX tasks_created_id_idx ON tasks (created_at, id, agent, status);

-- Held tasks (queued, and held for release): the rollups do not key them, so their filter read
-- every task for its page, count and charts (0.5 s and 2 s at a million). Only held tasks are in
-- this index, so a task that is not held costs it nothing.
CREATE INDEX tasks_held_idx ON tasks (created_at, id) WHERE held AND status = 'enqueued';

-- Results that need a person's review, the review queue's and the dashboard's filter: their page
-- read the row of every newer task to check its confidence. A task enters this index only when it
-- is completed with a confidence below the review threshold.
CREATE INDEX tasks_needs_review_idx ON tasks (created_at, id) WHERE quire_needs_review(status, confidence);
