-- Operator control: an agent paused (until a time, with a reason), the time a task spent held
-- apart from the time it queued, and why a waiting task waits.

-- A paused agent starts nothing new; its running tasks finish. Paused from paused_at until
-- paused_until (NULL: until resumed by hand); a pause whose time has passed needs no write to end.
ALTER TABLE agents ADD COLUMN paused_until timestamptz;
ALTER TABLE agents ADD COLUMN paused_reason text CHECK (length(paused_reason) <= 500);
ALTER TABLE agents ADD COLUMN paused_by text;
ALTER TABLE agents ADD COLUMN paused_at timestamptz;

-- Seconds a task spent held for review before an operator released it: the response time a
-- dashboard shows leaves them out (they are the operator's, not the queue's).
ALTER TABLE tasks ADD COLUMN held_seconds double precision NOT NULL DEFAULT 0;

-- The task table's rows: latency without the time held, and the times apart (queued, held, ran).
CREATE OR REPLACE VIEW task_list_rows AS
SELECT t.id, t.agent, t.customer, t.priority, t.status, t.document_name, t.document_sha256, t.pages,
       t.confidence, t.error, t.submitted_by, t.attempt_count, t.parent_id, t.created_at, t.finished_at,
       extract(epoch FROM t.finished_at - t.created_at) - t.held_seconds::numeric AS latency_s,
       s.input_tokens, s.output_tokens, s.llm_cost_usd, s.compute_cost_usd,
       coalesce(s.input_tokens, 0) + coalesce(s.output_tokens, 0) AS tokens,
       t.held_seconds
FROM tasks t
LEFT JOIN LATERAL (
    SELECT sum(a.input_tokens)::bigint AS input_tokens, sum(a.output_tokens)::bigint AS output_tokens,
           sum(a.llm_cost_usd) AS llm_cost_usd, sum(a.compute_cost_usd) AS compute_cost_usd
    FROM task_attempts a WHERE a.task_id = t.id
) s ON true;

-- The same columns as migration 0011's view; only the latency leaves the held time out.
CREATE OR REPLACE VIEW task_rollup_contrib AS
SELECT t.id AS task_id, t.created_at, t.finished_at, t.agent, t.customer, t.status,
       (s.attempts > 0)::int AS attempted, s.attempts, (s.usage_attempts > 0)::int AS with_usage,
       coalesce(s.input_tokens, 0) AS input_tokens, coalesce(s.output_tokens, 0) AS output_tokens,
       coalesce(s.llm_cost_usd, 0) AS llm_cost_usd, coalesce(s.compute_cost_usd, 0) AS compute_cost_usd,
       s.unpriced, s.compute_pending,
       (t.status = 'completed' AND t.confidence IS NOT NULL)::int AS confidence_n,
       CASE WHEN t.status = 'completed' AND t.confidence IS NOT NULL
            THEN t.confidence::numeric ELSE 0 END AS confidence_sum,
       CASE WHEN t.status = 'completed'
            THEN quire_log_bin(greatest(extract(epoch FROM t.finished_at - t.created_at)::float8
                                        - t.held_seconds, 0), 0.1) END AS latency_bin,
       -- real holds 0.9 as 0.8999...: rounding first puts it in the bin a person expects.
       CASE WHEN t.status = 'completed' AND t.confidence IS NOT NULL
            THEN least(width_bucket(round(t.confidence::numeric, 4), 0, 1, 10), 10)::smallint END AS confidence_bin,
       quire_log_bin(s.llm_cost_usd::float8, 1e-6) AS llm_bin,
       quire_log_bin(s.compute_cost_usd::float8, 1e-6) AS compute_bin,
       CASE WHEN s.llm_cost_usd IS NOT NULL OR s.compute_cost_usd IS NOT NULL
            THEN quire_log_bin((coalesce(s.llm_cost_usd, 0) + coalesce(s.compute_cost_usd, 0))::float8, 1e-6)
       END AS spend_bin,
       quire_needs_review(t.status, t.confidence) AS review
FROM tasks t
CROSS JOIN LATERAL (
    SELECT count(*)::int AS attempts,
           count(*) FILTER (WHERE a.usage_recorded_at IS NOT NULL)::int AS usage_attempts,
           sum(a.input_tokens)::bigint AS input_tokens, sum(a.output_tokens)::bigint AS output_tokens,
           sum(a.llm_cost_usd) AS llm_cost_usd, sum(a.compute_cost_usd) AS compute_cost_usd,
           count(*) FILTER (WHERE coalesce(a.input_tokens, 0) + coalesce(a.output_tokens, 0) > 0
                              AND a.llm_cost_usd IS NULL)::int AS unpriced,
           count(*) FILTER (WHERE a.finished_at IS NOT NULL AND a.job_run_id IS NOT NULL
                              AND a.compute_cost_usd IS NULL)::int AS compute_pending
    FROM task_attempts a WHERE a.task_id = t.id
) s;

-- Tasks of batches already released held from their upload to the release; the update marks
-- them for the next rollup fold, which moves their latency to the new bin.
UPDATE tasks t SET held_seconds = greatest(extract(epoch FROM b.released_at - t.created_at)::float8, 0)
FROM batches b
WHERE t.batch_id = b.id AND b.released_at IS NOT NULL AND t.held_seconds = 0;

-- Why each of the given enqueued tasks waits, first cause first: held for review, its agent paused,
-- a retry's backoff, its agent misconfigured, its customer over budget, its agent at its
-- concurrency cap, at its token budget (or waiting out the endpoint's Retry-After), else its turn
-- (priority and fair share across customers). `until` is when the cause ends, where known. One
-- call for a page of tasks: each agent's load is read once.
CREATE FUNCTION quire_wait_reasons(ids bigint[], p_now timestamptz)
RETURNS TABLE (task_id bigint, reason text, until timestamptz, detail text)
LANGUAGE sql STABLE AS $$
WITH waiting AS (
    SELECT t.id, t.agent, t.customer, t.held, t.run_after, t.estimated_tokens
    FROM tasks t WHERE t.id = ANY(ids) AND t.status = 'enqueued'
), agent_state AS (
    SELECT a.name, a.paused_at IS NOT NULL AND coalesce(a.paused_until > p_now, true) AS paused,
           a.paused_until, a.paused_reason, coalesce(a.config_error, a.halt_reason) AS config_error,
           a.throttled_until,
           least(a.max_concurrent_tasks, a.effective_concurrency) AS cap,
           least(a.max_tpm, a.effective_tpm) AS tpm,
           (SELECT count(*) FROM tasks p WHERE p.agent = a.name AND p.status = 'processing') AS in_flight,
           (SELECT coalesce(sum(coalesce(x.input_tokens + x.output_tokens, x.estimated_tokens)), 0)
              FROM task_attempts x
             WHERE x.agent = a.name
               AND (x.status = 'processing' OR coalesce(x.finished_at, x.started_at) > p_now - interval '60 seconds'))
               AS reserved
    FROM agents a WHERE a.name IN (SELECT DISTINCT agent FROM waiting)
), over_budget AS (
    SELECT b.customer FROM quire_customers_over_budget(p_now) b
)
SELECT w.id,
       CASE WHEN w.held THEN 'held'
            WHEN s.paused THEN 'agent_paused'
            WHEN w.run_after > p_now THEN 'retry_backoff'
            WHEN s.config_error IS NOT NULL THEN 'agent_misconfigured'
            WHEN w.customer IN (SELECT customer FROM over_budget) THEN 'customer_budget'
            WHEN s.cap IS NOT NULL AND s.in_flight >= s.cap THEN 'concurrency_cap'
            WHEN s.throttled_until > p_now
                 OR (s.tpm IS NOT NULL AND s.reserved > 0 AND s.reserved + w.estimated_tokens > s.tpm)
                 THEN 'token_budget'
            ELSE 'fair_share' END,
       CASE WHEN w.held THEN NULL
            WHEN s.paused THEN s.paused_until
            WHEN w.run_after > p_now THEN w.run_after
            WHEN s.config_error IS NOT NULL THEN NULL
            WHEN w.customer IN (SELECT customer FROM over_budget)
                 THEN (date_trunc('month', p_now AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC'
            WHEN s.cap IS NOT NULL AND s.in_flight >= s.cap THEN NULL
            WHEN s.throttled_until > p_now THEN s.throttled_until
            ELSE NULL END,
       CASE WHEN w.held THEN NULL
            WHEN s.paused THEN s.paused_reason
            WHEN w.run_after > p_now THEN NULL
            WHEN s.config_error IS NOT NULL THEN s.config_error
            WHEN w.customer IN (SELECT customer FROM over_budget) THEN w.customer
            WHEN s.cap IS NOT NULL AND s.in_flight >= s.cap THEN s.in_flight || ' of ' || s.cap || ' running'
            WHEN s.throttled_until > p_now THEN 'the model endpoint asked to wait'
            WHEN s.tpm IS NOT NULL AND s.reserved > 0 AND s.reserved + w.estimated_tokens > s.tpm
                 THEN s.reserved || ' of ' || s.tpm || ' tokens a minute reserved'
            ELSE NULL END
FROM waiting w JOIN agent_state s ON s.name = w.agent
$$;
