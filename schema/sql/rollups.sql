-- name: rollup_fold
-- Folds every task marked since the last fold into the rollups (-1: another fold is running).
SELECT quire_rollup_fold() AS folded;

-- name: rollup_pending_count
-- Marks not folded yet: a reader folds first when too many pile up (no worker running).
SELECT count(*) AS n FROM rollup_dirty;

-- name: rollup_keys
-- Fragment, not a query: the status, agent, customer and review filters on rollup or contribution rows x.
(%(statuses)s::text[] IS NULL OR x.status::text = ANY(%(statuses)s::text[]))
AND (%(agents)s::text[] IS NULL OR x.agent = ANY(%(agents)s::text[]))
AND (%(customers)s::text[] IS NULL OR x.customer = ANY(%(customers)s::text[]))
AND (NOT %(needs_review)s::boolean OR x.review)

-- name: rollup_segments
-- Fragment: the whole buckets a date range covers, at most two ranges per grain (see schema/rollups.py).
-- One flat OR of (grain, bucket range) arms: each arm is an index range, so the scan is a BitmapOr.
(   (x.grain = 'a' AND x.bucket >= %(a1_lo)s::timestamptz AND x.bucket < %(a1_hi)s::timestamptz)
 OR (x.grain = 'm' AND x.bucket >= %(m1_lo)s::timestamptz AND x.bucket < %(m1_hi)s::timestamptz)
 OR (x.grain = 'm' AND x.bucket >= %(m2_lo)s::timestamptz AND x.bucket < %(m2_hi)s::timestamptz)
 OR (x.grain = 'd' AND x.bucket >= %(d1_lo)s::timestamptz AND x.bucket < %(d1_hi)s::timestamptz)
 OR (x.grain = 'd' AND x.bucket >= %(d2_lo)s::timestamptz AND x.bucket < %(d2_hi)s::timestamptz)
 OR (x.grain = 'h' AND x.bucket >= %(h1_lo)s::timestamptz AND x.bucket < %(h1_hi)s::timestamptz)
 OR (x.grain = 'h' AND x.bucket >= %(h2_lo)s::timestamptz AND x.bucket < %(h2_hi)s::timestamptz))

-- name: rollup_raw
-- Fragment: the partial buckets at the ends of a date range, read from the tasks themselves.
((x.created_at >= %(r1_lo)s::timestamptz AND x.created_at < %(r1_hi)s::timestamptz)
 OR (x.created_at >= %(r2_lo)s::timestamptz AND x.created_at < %(r2_hi)s::timestamptz))

-- name: rollup_in_range
-- Fragment: the filter's own date range on a task's created_at.
(%(date_from)s::timestamptz IS NULL OR x.created_at >= %(date_from)s::timestamptz)
AND (%(date_to)s::timestamptz IS NULL OR x.created_at < %(date_to)s::timestamptz)

-- name: rollup_totals_by_key
-- Counts, spend and confidence per agent, customer and status: folded rows of whole buckets, plus
-- (now minus last folded) for tasks marked since the last fold, plus the partial buckets read raw.
WITH pending AS (
    -- An array, not a join: see rollup_pending_changes.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
), rows AS (
    SELECT x.agent, x.customer, x.status, x.tasks, x.attempted, x.attempts, x.with_usage, x.input_tokens,
           x.output_tokens, x.llm_cost_usd, x.compute_cost_usd, x.unpriced, x.compute_pending,
           x.confidence_n, x.confidence_sum
    FROM task_rollups x
    WHERE x.all_customers = %(all_customers)s AND {segments} AND {keys}
    UNION ALL
    SELECT x.agent, x.customer, x.status, 1, x.attempted, x.attempts, x.with_usage, x.input_tokens,
           x.output_tokens, x.llm_cost_usd, x.compute_cost_usd, x.unpriced, x.compute_pending,
           x.confidence_n, x.confidence_sum
    FROM task_rollup_contrib x
    WHERE %(with_pending)s::boolean AND x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
    UNION ALL
    SELECT x.agent, x.customer, x.status, -1, -x.attempted, -x.attempts, -x.with_usage, -x.input_tokens,
           -x.output_tokens, -x.llm_cost_usd, -x.compute_cost_usd, -x.unpriced, -x.compute_pending,
           -x.confidence_n, -x.confidence_sum
    FROM rollup_task_state x
    WHERE %(with_pending)s::boolean AND x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
    UNION ALL
    SELECT x.agent, x.customer, x.status, 1, x.attempted, x.attempts, x.with_usage, x.input_tokens,
           x.output_tokens, x.llm_cost_usd, x.compute_cost_usd, x.unpriced, x.compute_pending,
           x.confidence_n, x.confidence_sum
    FROM task_rollup_contrib x
    WHERE {raw} AND {keys}
)
SELECT agent, CASE WHEN %(all_customers)s THEN NULL ELSE customer END AS customer, status::text AS status,
       sum(tasks)::bigint AS tasks, sum(attempted)::bigint AS attempted, sum(attempts)::bigint AS attempts,
       sum(with_usage)::bigint AS with_usage, sum(input_tokens)::bigint AS input_tokens,
       sum(output_tokens)::bigint AS output_tokens, sum(llm_cost_usd) AS llm_cost_usd,
       sum(compute_cost_usd) AS compute_cost_usd, sum(unpriced)::bigint AS unpriced,
       sum(compute_pending)::bigint AS compute_pending, sum(confidence_n)::bigint AS confidence_n,
       sum(confidence_sum) AS confidence_sum
FROM rows
GROUP BY 1, 2, 3
HAVING sum(tasks) <> 0
ORDER BY 1, 2, 3;

-- name: rollup_bins_by_metric
-- Histogram bins (latency, confidence, LLM, compute and total spend per task), read like the totals.
WITH pending AS (
    -- An array, not a join: see rollup_pending_changes.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
), contrib AS (
    SELECT 1 AS sign, x.latency_bin, x.confidence_bin, x.llm_bin, x.compute_bin, x.spend_bin
    FROM task_rollup_contrib x
    WHERE %(with_pending)s::boolean AND x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
    UNION ALL
    SELECT -1, x.latency_bin, x.confidence_bin, x.llm_bin, x.compute_bin, x.spend_bin
    FROM rollup_task_state x
    WHERE %(with_pending)s::boolean AND x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
    UNION ALL
    SELECT 1, x.latency_bin, x.confidence_bin, x.llm_bin, x.compute_bin, x.spend_bin
    FROM task_rollup_contrib x
    WHERE {raw} AND {keys}
), rows AS (
    SELECT x.metric, x.bin, x.n
    FROM task_rollup_bins x
    WHERE x.all_customers = %(all_customers)s AND {segments} AND {keys}
    UNION ALL
    SELECT m.metric, m.bin, c.sign
    FROM contrib c
    CROSS JOIN LATERAL (VALUES ('l'::"char", c.latency_bin), ('c', c.confidence_bin), ('a', c.llm_bin),
                               ('m', c.compute_bin), ('s', c.spend_bin)) m (metric, bin)
    WHERE m.bin IS NOT NULL
)
SELECT metric::text AS metric, bin, sum(n)::bigint AS n
FROM rows
GROUP BY 1, 2
HAVING sum(n) <> 0
ORDER BY 1, 2;

-- name: rollup_throughput_series
-- Submissions per created bucket and outcomes per finished bucket, binned to %(bucket)s.
WITH pending AS (
    -- An array, not a join: see rollup_pending_changes.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
), rows AS (
    SELECT x.bucket AS created, x.finished, x.status, x.tasks
    FROM task_rollups x
    WHERE x.all_customers = %(all_customers)s AND {segments} AND {keys}
    UNION ALL
    SELECT x.created_at, x.finished_at, x.status, 1
    FROM task_rollup_contrib x
    WHERE %(with_pending)s::boolean AND x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
    UNION ALL
    SELECT x.created_at, x.finished_at, x.status, -1
    FROM rollup_task_state x
    WHERE %(with_pending)s::boolean AND x.task_id = ANY((SELECT ids FROM pending)::bigint[]) AND {keys} AND {in_range} AND NOT {raw}
    UNION ALL
    SELECT x.created_at, x.finished_at, x.status, 1
    FROM tasks_with_review x
    WHERE {raw} AND {keys}
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

-- name: rollup_pending_changes
-- What the next fold will log: tasks marked since the last fold, as (now minus last folded) per key.
WITH pending AS (
    -- An array, not a join: the marks' statistics are always stale (the fold empties the table), and a
    -- join planned on them reads every task; ids by primary key cost what the marks number.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
), signed AS (
    SELECT 1 AS sign, c.* FROM task_rollup_contrib c WHERE c.task_id = ANY((SELECT ids FROM pending)::bigint[])
    UNION ALL
    SELECT -1, s.* FROM rollup_task_state s WHERE s.task_id = ANY((SELECT ids FROM pending)::bigint[])
)
SELECT date_trunc('hour', created_at, 'UTC') AS hour, date_trunc('hour', finished_at, 'UTC') AS finished,
       agent, customer, status::text AS status, review, sum(sign)::bigint AS tasks,
       sum(sign * attempted)::bigint AS attempted, sum(sign * attempts)::bigint AS attempts,
       sum(sign * with_usage)::bigint AS with_usage, sum(sign * input_tokens) AS input_tokens,
       sum(sign * output_tokens) AS output_tokens, sum(sign * llm_cost_usd) AS llm_cost_usd,
       sum(sign * compute_cost_usd) AS compute_cost_usd, sum(sign * unpriced)::bigint AS unpriced,
       sum(sign * compute_pending)::bigint AS compute_pending, sum(sign * confidence_n)::bigint AS confidence_n,
       sum(sign * confidence_sum) AS confidence_sum
FROM signed
GROUP BY 1, 2, 3, 4, 5, 6
HAVING sum(sign) <> 0 OR sum(sign * attempts) <> 0 OR sum(sign * with_usage) <> 0
    OR sum(sign * input_tokens) <> 0 OR sum(sign * output_tokens) <> 0
    OR sum(sign * llm_cost_usd) <> 0 OR sum(sign * compute_cost_usd) <> 0
    OR sum(sign * unpriced) <> 0 OR sum(sign * compute_pending) <> 0
    OR sum(sign * confidence_n) <> 0 OR sum(sign * confidence_sum) <> 0;

-- name: rollup_pending_change_bins
-- The histogram bins of the tasks marked since the last fold, as (now minus last folded) per key.
WITH pending AS (
    -- An array, not a join: the marks' statistics are always stale (the fold empties the table), and a
    -- join planned on them reads every task; ids by primary key cost what the marks number.
    SELECT ARRAY(SELECT DISTINCT task_id FROM rollup_dirty) AS ids
), signed AS (
    SELECT 1 AS sign, c.* FROM task_rollup_contrib c WHERE c.task_id = ANY((SELECT ids FROM pending)::bigint[])
    UNION ALL
    SELECT -1, s.* FROM rollup_task_state s WHERE s.task_id = ANY((SELECT ids FROM pending)::bigint[])
)
SELECT date_trunc('hour', x.created_at, 'UTC') AS hour, x.agent, x.customer, x.status::text AS status, x.review,
       m.metric::text AS metric, m.bin, sum(x.sign)::bigint AS n
FROM signed x
CROSS JOIN LATERAL (VALUES ('l'::"char", x.latency_bin), ('c', x.confidence_bin), ('a', x.llm_bin),
                           ('m', x.compute_bin), ('s', x.spend_bin)) m (metric, bin)
WHERE m.bin IS NOT NULL
GROUP BY 1, 2, 3, 4, 5, 6, 7
HAVING sum(x.sign) <> 0;
