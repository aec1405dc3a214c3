-- name: rollup_fold
-- Folds the tasks marked since the last fold, all or the first %(max_marks)s marks (-1: another fold is running).
SELECT quire_rollup_fold(%(max_marks)s::integer) AS folded;

-- name: rollup_pending_count
-- Marks not folded yet, all counted (tests and tools; reads use rollup_backlog_bounded).
SELECT count(*) AS n FROM rollup_dirty;

-- name: rollup_backlog_bounded
-- How many marks wait, counted up to %(cap)s only (a read never pays for a bulk load's backlog); the
-- table's estimate beyond that, and when the oldest waiting change was made (the fold takes marks
-- in the table's order, so the first one left is about the oldest).
SELECT (SELECT count(*) FROM (SELECT 1 FROM rollup_dirty LIMIT %(cap)s) d) AS n,
       greatest(pg_stat_get_live_tuples('rollup_dirty'::regclass),
                (SELECT c.reltuples FROM pg_class c WHERE c.oid = 'rollup_dirty'::regclass))::bigint AS estimate,
       (SELECT d.marked_at FROM rollup_dirty d LIMIT 1) AS oldest;

-- name: rollup_marks_exist
-- Whether any mark waits: open pages' read a second asks only this (it stops at the first mark),
-- since counting them every second cost more than the rest of ten dashboards' reads during a drain.
SELECT EXISTS (SELECT 1 FROM rollup_dirty) AS waiting;

-- name: rollup_key_statuses
-- Fragment, not a query: the filters on rollup or contribution rows x, each composed in only when the
-- filter sets it (schema.rollups.composed), so that a prepared read's one plan can use the indexes.
-- The status as the enum, not as text: an index with the status (task_rollup_bins_customer) can
-- then skip other statuses' rows (app.inputs refuses a status that is none).
x.status = ANY(%(statuses)s::task_status[])

-- name: rollup_key_agents
-- Fragment: the agent filter.
x.agent = ANY(%(agents)s::text[])

-- name: rollup_key_customers
-- Fragment: the customer filter.
x.customer = ANY(%(customers)s::text[])

-- name: rollup_key_review
-- Fragment: the needs-review filter.
x.review

-- name: rollup_segment
-- Fragment: one range of whole buckets of one grain. schema.rollups.composed ORs together the ranges a
-- date range covers (schema.rollups.plan), and only those: each is an index range, so the scan is a
-- BitmapOr of them, and an arm for a range a filter does not have would cost its planning and an
-- index probe on every read. No range at all is FALSE.
(x.grain = {grain} AND x.bucket >= {lo}::timestamptz AND x.bucket < {hi}::timestamptz)

-- name: rollup_raw_range
-- Fragment: one partial bucket at an end of a date range, read from the tasks themselves; OR'd like
-- the segments (at most two ranges at each end: schema.rollups.plan), and FALSE when there is none.
(x.created_at >= {lo}::timestamptz AND x.created_at < {hi}::timestamptz)

-- name: rollup_from
-- Fragment: the filter's own date range on a task's created_at, its start (composed in when set).
x.created_at >= %(date_from)s::timestamptz

-- name: rollup_to
-- Fragment: its end.
x.created_at < %(date_to)s::timestamptz

-- name: rollup_count_filtered
-- How many tasks a filter selects (the task table's total), read like rollup_totals_by_key but with
-- the key columns only: no task's attempts are read, and the statement is small to plan.
WITH pending AS (
    -- An array, not a join: see rollup_pending_contrib.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
)
SELECT (SELECT coalesce(sum(x.tasks), 0) FROM task_rollups x
        WHERE x.all_customers = %(all_customers)s AND {segments} AND {keys})
{if_raw}
     + (SELECT count(*) FROM tasks_with_review x WHERE {raw} AND {keys})
{end_raw}
{if_pending}
     + (SELECT count(*) FROM tasks_with_review x
        WHERE x.id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw})
     - (SELECT count(*) FROM rollup_task_state x
        WHERE x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw})
{end_pending}
     AS n;

-- name: rollup_totals_rows
-- Fragment: the WITH clause the totals sum: folded rows of whole buckets, plus (now minus last
-- folded) for tasks marked since the last fold, plus the partial buckets read raw. The blocks
-- {if_pending} and {if_raw} are composed in only when the read has marks or raw ends
-- (schema.rollups.composed): a branch that is not there is not planned either.
WITH pending AS (
    -- An array, not a join: see rollup_pending_contrib.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
), rows AS (
    SELECT x.agent, x.customer, x.status, x.tasks, x.attempted, x.attempts, x.with_usage, x.input_tokens,
           x.output_tokens, x.llm_cost_usd, x.compute_cost_usd, x.unpriced, x.compute_pending,
           x.confidence_n, x.confidence_sum
    FROM task_rollups x
    WHERE x.all_customers = %(all_customers)s AND {segments} AND {keys}
{if_pending}
    UNION ALL
    SELECT x.agent, x.customer, x.status, 1, x.attempted, x.attempts, x.with_usage, x.input_tokens,
           x.output_tokens, x.llm_cost_usd, x.compute_cost_usd, x.unpriced, x.compute_pending,
           x.confidence_n, x.confidence_sum
    FROM task_rollup_contrib x
    WHERE x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
    UNION ALL
    SELECT x.agent, x.customer, x.status, -1, -x.attempted, -x.attempts, -x.with_usage, -x.input_tokens,
           -x.output_tokens, -x.llm_cost_usd, -x.compute_cost_usd, -x.unpriced, -x.compute_pending,
           -x.confidence_n, -x.confidence_sum
    FROM rollup_task_state x
    WHERE x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
{end_pending}
{if_raw}
    UNION ALL
    SELECT x.agent, x.customer, x.status, 1, x.attempted, x.attempts, x.with_usage, x.input_tokens,
           x.output_tokens, x.llm_cost_usd, x.compute_cost_usd, x.unpriced, x.compute_pending,
           x.confidence_n, x.confidence_sum
    FROM task_rollup_contrib x
    WHERE {raw} AND {keys}
{end_raw}
)

-- name: rollup_totals_sums
-- Fragment: the twelve sums of the totals' rows, as the totals' reads return them.
sum(tasks)::bigint AS tasks, sum(attempted)::bigint AS attempted, sum(attempts)::bigint AS attempts,
sum(with_usage)::bigint AS with_usage, sum(input_tokens)::bigint AS input_tokens,
sum(output_tokens)::bigint AS output_tokens, sum(llm_cost_usd) AS llm_cost_usd,
sum(compute_cost_usd) AS compute_cost_usd, sum(unpriced)::bigint AS unpriced,
sum(compute_pending)::bigint AS compute_pending, sum(confidence_n)::bigint AS confidence_n,
sum(confidence_sum) AS confidence_sum

-- name: rollup_totals_by_key
-- Counts, spend and confidence per agent, customer and status (/metrics and the status counts).
{totals_rows}
SELECT agent, CASE WHEN %(all_customers)s THEN NULL ELSE customer END AS customer, status::text AS status,
       {totals_sums}
FROM rows
GROUP BY 1, 2, 3
HAVING sum(tasks) <> 0
ORDER BY 1, 2, 3;

-- name: rollup_totals_by_status_and_agent
-- The same sums per status and per agent (`dimension`, `key`): a dashboard's counts and headline
-- figures, and its cost by agent, in the filter's own scope. Projections, not a product: read per
-- agent, customer and status, a thousand groups of twelve sums cost twice what the rows they sum do,
-- and a thousand rows to the client as much again (docs/BENCHMARKS.md).
{totals_rows}
SELECT CASE WHEN GROUPING(status) = 0 THEN 'status' ELSE 'agent' END AS dimension,
       CASE WHEN GROUPING(status) = 0 THEN status::text ELSE agent END AS key,
       {totals_sums}
FROM rows
GROUP BY GROUPING SETS ((status), (agent))
ORDER BY 1, 2;

-- name: rollup_cost_by_customer
-- Spend per customer, the sums a dashboard's cost by customer shows, from the per-customer rows. (A
-- filter without customers reads its status and agent figures from the all-customers rows: over 90
-- days of the benchmark's million tasks, 243 rows instead of 8,323.)
{totals_rows}
SELECT 'customer' AS dimension, customer AS key, sum(attempted)::bigint AS attempted,
       sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens,
       sum(llm_cost_usd) AS llm_cost_usd, sum(compute_cost_usd) AS compute_cost_usd
FROM rows
GROUP BY customer
ORDER BY 2;

-- name: rollup_bins_by_metric
-- Histogram bins (latency, confidence, LLM, compute and total spend per task), read like the totals;
-- a task's own bins are unnested to (metric, bin) rows, one per metric it has.
WITH pending AS (
    -- An array, not a join: see rollup_pending_contrib.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
), rows AS (
    SELECT x.metric, x.bin, x.n
    FROM task_rollup_bins x
    WHERE x.all_customers = %(all_customers)s AND {segments} AND {keys}
{if_pending}
    UNION ALL
    SELECT unnest('{{l,c,a,m,s}}'::"char"[]),
           unnest(ARRAY[x.latency_bin, x.confidence_bin, x.llm_bin, x.compute_bin, x.spend_bin]), 1
    FROM task_rollup_contrib x
    WHERE x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
    UNION ALL
    SELECT unnest('{{l,c,a,m,s}}'::"char"[]),
           unnest(ARRAY[x.latency_bin, x.confidence_bin, x.llm_bin, x.compute_bin, x.spend_bin]), -1
    FROM rollup_task_state x
    WHERE x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
{end_pending}
{if_raw}
    UNION ALL
    SELECT unnest('{{l,c,a,m,s}}'::"char"[]),
           unnest(ARRAY[x.latency_bin, x.confidence_bin, x.llm_bin, x.compute_bin, x.spend_bin]), 1
    FROM task_rollup_contrib x
    WHERE {raw} AND {keys}
{end_raw}
)
SELECT metric::text AS metric, bin, sum(n)::bigint AS n
FROM rows
WHERE bin IS NOT NULL
GROUP BY 1, 2
HAVING sum(n) <> 0
ORDER BY 1, 2;

-- name: rollup_throughput_series
-- Submissions per created bucket and outcomes per finished bucket, binned to %(bucket)s.
WITH pending AS (
    -- An array, not a join: see rollup_pending_contrib.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
), rows AS (
    SELECT x.bucket AS created, x.finished, x.status, x.tasks
    FROM task_rollups x
    WHERE x.all_customers = %(all_customers)s AND {segments} AND {keys}
{if_pending}
    UNION ALL
    SELECT x.created_at, x.finished_at, x.status, 1
    FROM task_rollup_contrib x
    WHERE x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
    UNION ALL
    SELECT x.created_at, x.finished_at, x.status, -1
    FROM rollup_task_state x
    WHERE x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
{end_pending}
{if_raw}
    UNION ALL
    SELECT x.created_at, x.finished_at, x.status, 1
    FROM tasks_with_review x
    WHERE {raw} AND {keys}
{end_raw}
)
SELECT 'submitted' AS series, date_bin(%(bucket)s::interval, created, %(origin)s::timestamptz) AS bucket,
       sum(tasks)::bigint AS n
FROM rows GROUP BY 1, 2 HAVING sum(tasks) <> 0
UNION ALL
SELECT status::text, date_bin(%(bucket)s::interval, finished, %(origin)s::timestamptz), sum(tasks)::bigint
FROM rows WHERE finished IS NOT NULL AND status IN ('completed', 'failed', 'cancelled')
GROUP BY 1, 2 HAVING sum(tasks) <> 0
ORDER BY 2, 1;

-- name: task_first_created_filtered
-- The first submission the filters select (walks the created_at index).
SELECT x.created_at FROM tasks_with_review x WHERE {keys} AND {in_range} ORDER BY x.created_at LIMIT 1;

-- name: rollup_snapshot
-- The first statement of a read of several queries: they all see the same folds and marks.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;

-- name: rollup_log_state
-- The newest fold, and the last fold pruned from the log (figures older than it are read again).
SELECT coalesce((SELECT max(fold_id) FROM rollup_folds), h.pruned_through) AS last_fold,
       h.pruned_through
FROM rollup_log_horizon h;

-- name: rollup_changes_after
-- What the folds after %(after)s changed, per created hour and key: advances figures held in memory.
SELECT fold_id, hour, finished, agent, customer, status::text AS status, review, tasks, attempted, attempts,
       with_usage, input_tokens, output_tokens, llm_cost_usd, compute_cost_usd, unpriced, compute_pending,
       confidence_n, confidence_sum
FROM rollup_changes
WHERE fold_id > %(after)s
ORDER BY fold_id;

-- name: rollup_change_bins_after
-- The histogram bins the folds after %(after)s changed, per created hour and key.
SELECT fold_id, hour, agent, customer, status::text AS status, review, metric::text AS metric, bin, n
FROM rollup_change_bins
WHERE fold_id > %(after)s
ORDER BY fold_id;

-- name: rollup_pending_contrib
-- What the next fold will log: per task marked since the last fold, its contribution now (+1) and as
-- last folded (-1); the caller groups them per created hour and key.
WITH pending AS (
    -- An array, not a join: the marks' statistics are always stale (the fold empties the table), and a
    -- join planned on them reads every task; ids by primary key cost what the marks number.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
)
SELECT 1 AS sign, c.created_at, c.finished_at, c.agent, c.customer, c.status::text AS status, c.review,
       c.attempted, c.attempts, c.with_usage, c.input_tokens, c.output_tokens, c.llm_cost_usd, c.compute_cost_usd,
       c.unpriced, c.compute_pending, c.confidence_n, c.confidence_sum, c.latency_bin, c.confidence_bin, c.llm_bin,
       c.compute_bin, c.spend_bin
FROM task_rollup_contrib c WHERE c.task_id = ANY((SELECT ids FROM pending)::bigint[])
UNION ALL
SELECT -1, s.created_at, s.finished_at, s.agent, s.customer, s.status::text, s.review,
       s.attempted, s.attempts, s.with_usage, s.input_tokens, s.output_tokens, s.llm_cost_usd, s.compute_cost_usd,
       s.unpriced, s.compute_pending, s.confidence_n, s.confidence_sum, s.latency_bin, s.confidence_bin, s.llm_bin,
       s.compute_bin, s.spend_bin
FROM rollup_task_state s WHERE s.task_id = ANY((SELECT ids FROM pending)::bigint[]);

-- name: rollup_drain_under_way_one
-- Whether a drain is under way: tasks run while others wait their turn (due, not held). The folds
-- wait a little then (worker/folder.py), each through the partial index of its status.
SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'processing')
       AND EXISTS (SELECT 1 FROM tasks WHERE status = 'enqueued' AND NOT held AND run_after <= now()) AS draining;
