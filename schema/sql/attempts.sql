-- name: attempt_get
-- One attempt by id (never its callback secret).
SELECT * FROM task_attempts_public WHERE id = %(attempt_id)s;

-- name: attempt_list_for_task
-- Every attempt of a task, oldest first (never their callback secrets).
SELECT * FROM task_attempts_public WHERE task_id = %(task_id)s ORDER BY attempt_no;

-- name: attempt_get_secret
-- The key a callback for this attempt must be signed with.
SELECT callback_secret, executor, task_id FROM task_attempts WHERE id = %(attempt_id)s;

-- name: attempt_task_id
-- Which task an attempt belongs to (immutable, so read before locking the task row).
SELECT task_id FROM task_attempts WHERE id = %(attempt_id)s;

-- name: attempt_touch_heartbeat
-- Notes that the attempt is alive.
UPDATE task_attempts SET heartbeat_at = coalesce(%(now)s, now())
WHERE id = %(attempt_id)s AND status = 'processing';

-- name: attempt_cancel_open
-- A cancelled task's running attempts are cancelled with it.
UPDATE task_attempts SET status = 'cancelled', finished_at = coalesce(%(now)s, now()), error = 'task cancelled'
WHERE task_id = %(task_id)s AND status = 'processing'
RETURNING id;

-- name: attempt_set_executor_info
-- The executor's handle on a running attempt: process id or job run id. A job run is billed by the
-- billing tables whoever settles it (its worker, a callback, the run reconciler): its compute is
-- pending from the moment it exists.
UPDATE task_attempts SET pid = coalesce(%(pid)s, pid), job_run_id = coalesce(%(job_run_id)s, job_run_id),
                         executor = coalesce(%(executor)s, executor),
                         compute_state = CASE WHEN %(job_run_id)s::text IS NOT NULL AND compute_state IS NULL
                                              THEN 'pending' ELSE compute_state END
WHERE id = %(attempt_id)s;

-- name: attempt_record_compute
-- Compute measured by the executor (wall and CPU seconds, cost, DBUs), kept apart from LLM spend.
UPDATE task_attempts SET
    compute_seconds = coalesce(%(compute_seconds)s, compute_seconds),
    cpu_seconds = coalesce(%(cpu_seconds)s, cpu_seconds),
    compute_cost_usd = coalesce(%(compute_cost_usd)s, compute_cost_usd),
    dbus = coalesce(%(dbus)s, dbus),
    compute_state = CASE WHEN compute_state IN ('billed', 'final', 'unbilled') THEN compute_state
                         ELSE coalesce(%(compute_state)s, compute_state) END
WHERE id = %(attempt_id)s;

-- name: attempt_list_running_ids
-- Local runs some worker launched that have not ended: a stopping app serves callbacks until these
-- report. Job runs are not waited for: they outlive the app and report to the next one, or
-- through their Volume report.
SELECT id FROM task_attempts
WHERE status = 'processing' AND pid IS NOT NULL AND job_run_id IS NULL
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
ORDER BY id;

-- name: attempt_list_detached_expired_batch
-- Job runs nobody watches: processing attempts with a job run id whose task's lease expired (their
-- worker stopped, and the run's own heartbeats stopped too), after a cursor. The run reconciler
-- asks each run how it ended; the sweeper leaves these tasks alone.
SELECT a.id AS attempt_id, a.task_id, a.job_run_id, a.executor, t.document_uri
FROM tasks t JOIN task_attempts a ON a.id = t.current_attempt_id
WHERE t.status = 'processing' AND t.lease_expires_at < coalesce(%(now)s, now())
  AND a.status = 'processing' AND a.job_run_id IS NOT NULL AND a.id > %(after_id)s
ORDER BY a.id
LIMIT %(batch)s;
