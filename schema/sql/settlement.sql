-- name: task_lock_for_attempts
-- The tasks of the attempts a worker saw end, locked in task id order (so batches never deadlock
-- each other), with what each attempt and task stand at; a task's attempts in id order.
SELECT a.id AS attempt_id, a.task_id, a.status::text AS attempt_status, a.reported_status,
       t.status::text AS task_status, t.agent
FROM task_attempts a JOIN tasks t ON t.id = a.task_id
WHERE a.id = ANY(%(attempt_ids)s::bigint[])
ORDER BY t.id, a.id
FOR UPDATE OF t;

-- name: task_apply_reports_batch
-- Applies agents' reports to their attempts and tasks, and records the compute each run used:
-- quire_apply_reports (migration 23), the one place a report changes a task. The callback
-- endpoint applies a batch of one; the worker's settlement a batch of the runs it saw end.
SELECT * FROM quire_apply_reports(%(reports)s::json, %(attempt_ids)s::bigint[], %(fresh_only)s::boolean,
                                  %(now)s::timestamptz, %(backoff_base)s::float8, %(backoff_cap)s::float8);
