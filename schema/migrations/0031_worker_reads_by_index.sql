-- Reads a worker makes every round, and the dashboard for every page of waiting tasks, that read
-- a whole table where an index holds the answer.
--
-- When the earliest backing-off task becomes claimable: a claimer that found less work than slots
-- asks, since nothing notifies when a backoff ends. The question read every enqueued task (a
-- sequential scan: 13 ms at 100,000 of them, about 130 ms at a million, each time a round ran dry,
-- as every round of a throttled agent's backlog does). Tasks whose run_after lies past their
-- creation are the ones put back after it (a backoff, a retry, a hand-back, a released batch):
-- this index holds those while they wait, and the first of them past now is read from it. New
-- tasks, which the queue holds most of, are not in it, so an enqueue writes nothing more.
CREATE INDEX tasks_backoff_idx ON tasks (run_after) WHERE status = 'enqueued' AND run_after > created_at;

-- A throttled agent's token window, "running, or ended in the last minute", was written
-- coalesce(finished_at, started_at) > now - 60 s, which no index answers: every attempt the agent
-- ever had was read (36 ms at 200,000 attempts) by each throttled claim's admission and by each
-- page of waiting tasks, each with a copy of the sum. One definition now serves both, the same
-- condition spelled so that each part is read from an index: running
-- (task_attempts_processing_idx), ended in the minute (task_attempts_finished_idx), or never ended
-- and started in it (0.06 ms at 200,000). A table of one row, so that the planner inlines it into
-- the query that reads it. When the window next frees (schema/sql/agents.sql) changes the same way.
CREATE FUNCTION quire_window_tokens(p_agent text, p_now timestamp with time zone) RETURNS TABLE (tokens numeric)
    LANGUAGE sql STABLE AS $$
    -- An attempt's tokens reach the endpoint until it ends: it counts until a minute after that,
    -- at its actual usage once reported, else at its reservation.
    SELECT coalesce(sum(coalesce(x.input_tokens + x.output_tokens, x.estimated_tokens)), 0)
    FROM task_attempts x
    WHERE x.agent = p_agent
      AND (x.status = 'processing' OR x.finished_at > p_now - interval '60 seconds'
           OR (x.finished_at IS NULL AND x.started_at > p_now - interval '60 seconds'))
$$;

CREATE OR REPLACE FUNCTION quire_wait_reasons(ids bigint[], p_now timestamp with time zone) RETURNS TABLE(task_id bigint, reason text, until timestamp with time zone, detail text)
    LANGUAGE sql STABLE
    AS $$
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
           (SELECT win.tokens FROM quire_window_tokens(a.name, p_now) win) AS reserved
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
