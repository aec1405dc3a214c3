-- The dashboard filters, each a fragment composed into the blocks below as {task_filter}
-- (schema.stats.task_filter), and only when the filter sets it, so that every figure reads the
-- same set of tasks, and the planner sees each condition as it is: an index or a partial index
-- that answers it is used (a condition written `param IS NULL OR ...` keeps every index off).

-- name: task_filter_from
t.created_at >= %(date_from)s::timestamptz

-- name: task_filter_to
t.created_at < %(date_to)s::timestamptz

-- name: task_filter_status
-- One task status, as a value the newest-first walk checks within tasks_created_id_idx, which holds
-- it, or which a partial index of the status's work (queued, processing) answers.
t.status = %(task_status)s::task_status

-- name: task_filter_statuses
t.status::text = ANY(%(task_statuses)s::text[])

-- name: task_filter_held
-- "held" is a status of the filter, not of the task: queued, and held for release by an operator
-- (tasks_held_idx holds them).
(t.held AND t.status = 'enqueued')

-- name: task_filter_agent
-- One agent, as a value the newest-first walk checks within tasks_created_id_idx, which holds it.
t.agent = %(agent)s::text

-- name: task_filter_agents
t.agent = ANY(%(agents)s::text[])

-- name: task_filter_customer
t.customer = %(customer)s::text

-- name: task_filter_customers
t.customer = ANY(%(customers)s::text[])

-- name: task_filter_review
-- As tasks_needs_review_idx holds them.
quire_needs_review(t.status, t.confidence)

-- name: stats_summary_filtered
-- Every headline figure of the dashboard in one pass over the filtered tasks and their attempts.
WITH t AS (
    SELECT * FROM tasks t WHERE {task_filter}
), spend AS (
    SELECT sum(a.input_tokens)::bigint AS input_tokens, sum(a.output_tokens)::bigint AS output_tokens,
           sum(a.llm_cost_usd) AS llm_cost_usd, sum(a.compute_cost_usd) AS compute_cost_usd,
           count(DISTINCT a.task_id) FILTER (WHERE a.usage_recorded_at IS NOT NULL) AS tasks_with_usage,
           count(*) AS attempts
    FROM task_attempts a JOIN t ON t.id = a.task_id
)
SELECT count(*) AS total,
       count(*) FILTER (WHERE t.status = 'enqueued') AS enqueued,
       count(*) FILTER (WHERE t.status = 'processing') AS processing,
       count(*) FILTER (WHERE t.status = 'completed') AS completed,
       count(*) FILTER (WHERE t.status = 'failed') AS failed,
       count(*) FILTER (WHERE t.status = 'cancelled') AS cancelled,
       avg(t.confidence) FILTER (WHERE t.status = 'completed') AS avg_confidence,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM t.finished_at - t.created_at) - t.held_seconds)
           FILTER (WHERE t.status = 'completed') AS median_latency_s,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM t.finished_at - t.created_at) - t.held_seconds)
           FILTER (WHERE t.status = 'completed') AS p95_latency_s,
       min(t.created_at) AS first_created_at,
       max(greatest(t.created_at, t.finished_at)) AS last_activity_at,
       (SELECT input_tokens FROM spend) AS input_tokens,
       (SELECT output_tokens FROM spend) AS output_tokens,
       (SELECT llm_cost_usd FROM spend) AS llm_cost_usd,
       (SELECT compute_cost_usd FROM spend) AS compute_cost_usd,
       (SELECT tasks_with_usage FROM spend) AS tasks_with_usage,
       (SELECT attempts FROM spend) AS attempts
FROM t;

-- name: task_list_keyset
-- One page of the dashboard's task table after a cursor (keyset, never OFFSET); the caller composes
-- in a whitelisted sort column and direction, and the cursor condition (TRUE on the first page).
-- The columns are the view's: the task row is defined once, in task_list_rows.
SELECT t.*, {sort_value} AS sort_value
FROM task_list_rows t
WHERE {task_filter} AND {after}
ORDER BY {order_by}
LIMIT %(limit)s;

-- name: task_list_keyset_by_task
-- The same page when its order is the task row's own (any sort but spend and latency): the page's ids
-- are picked from tasks first, so the attempts' spend is summed for its rows only, not for every row
-- the filter selects before the sort (800 of a customer's failed tasks for a page of 25).
WITH page AS (
    SELECT t.id FROM tasks t WHERE {task_filter} AND {after} ORDER BY {order_by} LIMIT %(limit)s
)
SELECT t.*, {sort_value} AS sort_value
FROM task_list_rows t
WHERE t.id = ANY(ARRAY(SELECT page.id FROM page))
ORDER BY {order_by};

-- name: task_after_cursor
-- Fragment: rows after the cursor (sort value, id) in a NULLS LAST order, either direction.
({sort_value} IS NULL OR {sort_value} {op} %(after_value)s
 OR ({sort_value} = %(after_value)s AND t.id {op} %(after_id)s))

-- name: task_after_cursor_null
-- Fragment: rows after a cursor whose sort value is NULL: only NULLs remain, in id order.
({sort_value} IS NULL AND t.id {op} %(after_id)s)

-- name: task_after_id
-- Fragment: rows after the cursor when the order is the id itself (an index range, not a filter).
(t.id {op} %(after_id)s)

-- name: task_after_row
-- Fragment: rows after the cursor (sort value, id) of a column with no NULLs: one row comparison,
-- an index range where an index leads with the column (submitted: tasks_created_id_idx).
(({sort_value}, t.id) {op} (%(after_value)s, %(after_id)s))

-- name: task_created_at
-- When a task was submitted: where an API cursor of the id alone (its form before the order was
-- by submission) starts.
SELECT t.created_at FROM tasks t WHERE t.id = %(id)s;

-- name: task_count_exact
-- How many tasks the filters select, counted from the tasks (a filter the rollups do not hold: held).
SELECT count(*) AS n FROM tasks t WHERE {task_filter};

-- name: task_first_created_exact
-- When the first of the filtered tasks was submitted: the start of a chart read from the tasks.
SELECT min(t.created_at) AS first FROM tasks t WHERE {task_filter};

-- name: task_count_estimate
-- The planner's estimate of how many tasks the filters select: costs planning, reads no rows.
EXPLAIN (FORMAT JSON) SELECT 1 FROM tasks t WHERE {task_filter};

-- name: task_list_by_ids
-- The current state of a set of tasks (an upload batch).
SELECT t.id, t.status::text AS status, t.error, t.confidence, t.document_name, t.finished_at
FROM tasks t WHERE t.id = ANY(%(ids)s::bigint[]) ORDER BY t.id;

-- name: task_find_by_sha256
-- The task to offer for each document the same customer submitted already: a completed one first,
-- else the newest. Another customer's task is never offered.
SELECT DISTINCT ON (t.document_sha256)
       t.document_sha256, t.id, t.status::text AS status, t.document_name, t.confidence, t.created_at,
       t.document_uri
FROM tasks t
WHERE t.document_sha256 = ANY(%(sha256s)s::text[])
  AND t.customer IS NOT DISTINCT FROM %(customer)s::text
ORDER BY t.document_sha256, (t.status = 'completed') DESC, t.id DESC;

-- name: task_sha256_in_use_list
-- Which of these documents any task refers to, whoever submitted it: a stored file they name stays.
SELECT DISTINCT t.document_sha256 FROM tasks t WHERE t.document_sha256 = ANY(%(sha256s)s::text[]);

-- name: stats_throughput_series
-- Submissions and outcomes per time bucket, for the throughput chart.
SELECT 'submitted' AS series, date_bin(%(bucket)s::interval, t.created_at, %(origin)s::timestamptz) AS bucket,
       count(*) AS n
FROM tasks t WHERE {task_filter}
GROUP BY 1, 2
UNION ALL
SELECT t.status::text, date_bin(%(bucket)s::interval, t.finished_at, %(origin)s::timestamptz), count(*)
FROM tasks t WHERE {task_filter} AND t.finished_at IS NOT NULL
GROUP BY 1, 2
ORDER BY 2, 1;

-- name: stats_cost_by_agent
-- LLM and compute spend per agent over the filtered tasks.
SELECT t.agent AS key, coalesce(sum(a.llm_cost_usd), 0) AS llm_cost_usd,
       coalesce(sum(a.compute_cost_usd), 0) AS compute_cost_usd,
       coalesce(sum(a.input_tokens)::bigint, 0) + coalesce(sum(a.output_tokens)::bigint, 0) AS tokens,
       count(DISTINCT t.id) AS tasks
FROM tasks t JOIN task_attempts a ON a.task_id = t.id
WHERE {task_filter}
GROUP BY t.agent
ORDER BY 2 DESC, 1;

-- name: stats_cost_by_customer
-- LLM and compute spend per customer over the filtered tasks.
SELECT coalesce(t.customer, '(none)') AS key, coalesce(sum(a.llm_cost_usd), 0) AS llm_cost_usd,
       coalesce(sum(a.compute_cost_usd), 0) AS compute_cost_usd,
       coalesce(sum(a.input_tokens)::bigint, 0) + coalesce(sum(a.output_tokens)::bigint, 0) AS tokens,
       count(DISTINCT t.id) AS tasks
FROM tasks t JOIN task_attempts a ON a.task_id = t.id
WHERE {task_filter}
GROUP BY 1
ORDER BY 2 DESC, 1
LIMIT 30;

-- name: stats_latency_histogram
-- Submission-to-completion times of completed tasks in %(bins)s equal bins between min and max.
WITH lat AS (
    SELECT (extract(epoch FROM t.finished_at - t.created_at)::float8 - t.held_seconds) AS s
    FROM tasks t WHERE {task_filter} AND t.status = 'completed'
), bounds AS (
    SELECT min(s) AS lo, max(s) AS hi FROM lat
)
SELECT least(width_bucket(lat.s, b.lo, b.hi + 1e-6, %(bins)s), %(bins)s) AS bin,
       b.lo, b.hi, count(*) AS n
FROM lat CROSS JOIN bounds b
GROUP BY 1, 2, 3
ORDER BY 1;

-- name: stats_confidence_histogram
-- Overall confidence of completed tasks in ten bins from 0 to 1.
-- real holds 0.9 as 0.8999…: rounding first puts it in the bin a person expects.
SELECT least(width_bucket(round(t.confidence::numeric, 4), 0, 1, 10), 10) AS bin, count(*) AS n
FROM tasks t
WHERE {task_filter} AND t.status = 'completed' AND t.confidence IS NOT NULL
GROUP BY 1
ORDER BY 1;

-- name: stats_compute_measured_filtered
-- Compute spend per attempt: measured (local runs: run time x rate) or billed (Databricks job runs,
-- written by the billing reconciler), and how many job runs wait for their bill, are billed but
-- not final yet, were never billed, or have DBUs with no list price.
SELECT sum(a.compute_cost_usd) AS compute_cost_usd, sum(a.compute_seconds) AS compute_seconds,
       sum(a.dbus) AS dbus, count(*) FILTER (WHERE a.compute_cost_usd IS NOT NULL) AS attempts_measured,
       count(*) AS attempts, count(*) FILTER (WHERE a.compute_state = 'pending') AS attempts_pending,
       count(*) FILTER (WHERE a.compute_state = 'billed') AS attempts_provisional,
       count(*) FILTER (WHERE a.compute_state = 'unbilled') AS attempts_unbilled,
       count(*) FILTER (WHERE a.compute_unpriced) AS attempts_unpriced
FROM task_attempts a JOIN tasks t ON t.id = a.task_id
WHERE {task_filter};

-- name: stats_filter_options
-- Agents and customers to offer in the dashboard filters.
SELECT 'agent' AS kind, name AS value FROM agents
UNION ALL
SELECT 'customer', c.customer FROM (
    -- From the all-time rollup rows (one per customer, agent and status) and the first 5,000 marks
    -- not folded yet, not from a scan of every task: a bulk load's customers appear as it is folded.
    SELECT customer FROM task_rollups
    WHERE NOT all_customers AND grain = 'a' AND customer IS NOT NULL AND tasks <> 0
    UNION
    SELECT customer FROM tasks
    WHERE id = ANY(ARRAY(SELECT task_id FROM rollup_dirty LIMIT 5000)) AND customer IS NOT NULL
    ORDER BY customer LIMIT 500
) c
ORDER BY 1, 2;

-- name: task_events_after
-- The event log after a given id, for SSE replay (Last-Event-ID) and catch-up after a lost LISTEN.
SELECT e.id, e.task_id, e.agent, e.status::text AS status, e.prev_status::text AS prev_status,
       e.actor, e.at
FROM task_events e
WHERE e.id > %(after_id)s
ORDER BY e.id
LIMIT %(limit)s;

-- name: task_events_last_id
-- The newest event id, sent with the SSE snapshot so a client can resume from it.
SELECT coalesce(max(id), 0) AS last_id FROM task_events;

-- name: stats_queue_health
-- Per agent: age of the oldest enqueued task and how many wait for token budget, for /metrics.
SELECT t.agent, extract(epoch FROM coalesce(%(now)s, now()) - min(t.created_at))::float8 AS oldest_enqueued_age_s,
       count(*) FILTER (WHERE t.waiting_since IS NOT NULL) AS waiting_for_budget
FROM tasks t WHERE t.status = 'enqueued'
GROUP BY t.agent
ORDER BY t.agent;

-- name: health_ping
-- The cheapest round trip that proves a pooled connection works.
SELECT 1 AS ok;

-- name: task_ids_for_bulk_list
-- Bulk actions over the whole filter: the ids of the filtered tasks in the states the action
-- applies to, by id, up to %(limit)s (the caller composes the filter in as {task_filter}).
SELECT t.id, t.status::text AS status
FROM tasks t
WHERE {task_filter} AND t.status::text = ANY(%(applicable)s::text[])
ORDER BY t.id
LIMIT %(limit)s;
