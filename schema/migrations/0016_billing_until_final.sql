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
