-- What the task table and the API list show: a task with the spend of all its attempts.
CREATE VIEW task_list_rows AS
SELECT t.id, t.agent, t.customer, t.priority, t.status, t.document_name, t.document_sha256, t.pages,
       t.confidence, t.error, t.submitted_by, t.attempt_count, t.parent_id, t.created_at, t.finished_at,
       extract(epoch FROM t.finished_at - t.created_at) AS latency_s,
       s.input_tokens, s.output_tokens, s.llm_cost_usd, s.compute_cost_usd,
       coalesce(s.input_tokens, 0) + coalesce(s.output_tokens, 0) AS tokens
FROM tasks t
LEFT JOIN LATERAL (
    SELECT sum(a.input_tokens)::bigint AS input_tokens, sum(a.output_tokens)::bigint AS output_tokens,
           sum(a.llm_cost_usd) AS llm_cost_usd, sum(a.compute_cost_usd) AS compute_cost_usd
    FROM task_attempts a WHERE a.task_id = t.id
) s ON true;

-- Attempts as everything but the callback route reads them: never with their callback secret.
CREATE VIEW task_attempts_public AS
SELECT id, task_id, attempt_no, agent, worker_id, executor, status, job_run_id, pid, trace_id,
       estimated_tokens, input_tokens, output_tokens, llm_cost_usd, compute_cost_usd, dbus,
       compute_seconds, cpu_seconds, usage_recorded_at, reported_status, callbacks_received, started_at,
       heartbeat_at, finished_at, error
FROM task_attempts;
