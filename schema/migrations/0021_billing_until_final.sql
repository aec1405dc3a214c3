-- Databricks compute taken from the billing tables until its figures are final: billing arrives
-- over hours and corrects itself (RETRACTION and RESTATEMENT records), so an attempt's DBUs and
-- cost are rewritten whenever its records change ('billed': provisional), and frozen once they
-- have stayed the same long enough after the run ended ('final'). A run the tables never bill is
-- marked 'unbilled' after a while instead of staying 'pending' for ever. DBUs with no list price
-- are counted but unpriced (their cost unknown, never $0).

ALTER TABLE task_attempts DROP CONSTRAINT IF EXISTS task_attempts_compute_state_check;
ALTER TABLE task_attempts
    ADD CONSTRAINT task_attempts_compute_state_check
        CHECK (compute_state IN ('measured', 'pending', 'billed', 'final', 'unbilled')),
    ADD COLUMN compute_unpriced boolean NOT NULL DEFAULT false,
    -- how many billing records the figures were made of, and when they last changed
    ADD COLUMN billing_records integer,
    ADD COLUMN billing_changed_at timestamptz;

-- The billing reconciler walks the job runs whose figures are not final yet.
DROP INDEX IF EXISTS task_attempts_compute_pending_idx;
CREATE INDEX task_attempts_compute_open_idx ON task_attempts (id)
    WHERE compute_state IN ('pending', 'billed');

CREATE OR REPLACE VIEW task_attempts_public AS
SELECT id, task_id, attempt_no, agent, worker_id, executor, status, job_run_id, pid, trace_id,
       estimated_tokens, input_tokens, output_tokens, llm_cost_usd, compute_cost_usd, dbus,
       compute_seconds, cpu_seconds, usage_recorded_at, reported_status, callbacks_received, started_at,
       heartbeat_at, finished_at, error, llm_unpriced, compute_state, compute_unpriced
FROM task_attempts;

-- A job run billing never reported, or whose DBUs have no list price, is no longer pending: the
-- rollups stop counting it so (migration 0017's view otherwise, latency without held time). No attempt is in either case yet, so nothing needs refolding.
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
                              AND a.compute_cost_usd IS NULL AND a.compute_state IS DISTINCT FROM 'unbilled'
                              AND NOT a.compute_unpriced)::int AS compute_pending
    FROM task_attempts a WHERE a.task_id = t.id
) s;
-- ... and a change of compute state or of the unpriced flag marks the task for the next fold.
CREATE OR REPLACE FUNCTION quire_rollup_mark_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO rollup_dirty (task_id) SELECT DISTINCT n.task_id FROM new_rows n;
    ELSE
        INSERT INTO rollup_dirty (task_id)
        SELECT DISTINCT n.task_id FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE (n.input_tokens, n.output_tokens, n.llm_cost_usd, n.compute_cost_usd, n.usage_recorded_at,
               n.finished_at, n.job_run_id, n.task_id, n.compute_state, n.compute_unpriced)
              IS DISTINCT FROM (o.input_tokens, o.output_tokens, o.llm_cost_usd, o.compute_cost_usd,
                                o.usage_recorded_at, o.finished_at, o.job_run_id, o.task_id,
                                o.compute_state, o.compute_unpriced);
    END IF;
    RETURN NULL;
END $$;
ALTER FUNCTION quire_rollup_mark_attempts() SET enable_nestloop = off;
