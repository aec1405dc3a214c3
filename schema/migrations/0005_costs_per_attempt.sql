-- Costs that are right per attempt: LLM usage without a configured price is "unpriced" (NULL
-- cost and a flag, never $0), and Databricks compute is "pending" until the billing tables
-- have the run, then "billed" with its DBUs and cost.

-- An agent without configured prices is unpriced; 0 now means "free", said on purpose.
ALTER TABLE agents ALTER COLUMN price_input_per_mtok DROP NOT NULL,
                   ALTER COLUMN price_input_per_mtok DROP DEFAULT,
                   ALTER COLUMN price_output_per_mtok DROP NOT NULL,
                   ALTER COLUMN price_output_per_mtok DROP DEFAULT;

ALTER TABLE task_attempts
    ADD COLUMN llm_unpriced boolean NOT NULL DEFAULT false,
    -- measured: run time x rate; pending: a job run billing has not reported yet; billed: from billing
    ADD COLUMN compute_state text CHECK (compute_state IN ('measured', 'pending', 'billed'));

-- The billing reconciler walks the job runs still waiting for their bill.
CREATE INDEX task_attempts_compute_pending_idx ON task_attempts (id)
    WHERE compute_state = 'pending';

CREATE OR REPLACE VIEW task_attempts_public AS
SELECT id, task_id, attempt_no, agent, worker_id, executor, status, job_run_id, pid, trace_id,
       estimated_tokens, input_tokens, output_tokens, llm_cost_usd, compute_cost_usd, dbus,
       compute_seconds, cpu_seconds, usage_recorded_at, reported_status, callbacks_received, started_at,
       heartbeat_at, finished_at, error, llm_unpriced, compute_state
FROM task_attempts;
