-- name: attempt_get
-- One attempt by id (never its callback secret).
SELECT id, task_id, attempt_no, agent, worker_id, executor, status, job_run_id, pid, trace_id,
       estimated_tokens, input_tokens, output_tokens, llm_cost_usd, compute_cost_usd, dbus,
       compute_seconds, usage_recorded_at, reported_status, callbacks_received, started_at,
       heartbeat_at, finished_at, error
FROM task_attempts WHERE id = %(attempt_id)s;

-- name: attempt_list_for_task
-- Every attempt of a task, oldest first (never their callback secrets).
SELECT id, task_id, attempt_no, agent, worker_id, executor, status, job_run_id, pid, trace_id,
       estimated_tokens, input_tokens, output_tokens, llm_cost_usd, compute_cost_usd, dbus,
       compute_seconds, usage_recorded_at, reported_status, callbacks_received, started_at,
       heartbeat_at, finished_at, error
FROM task_attempts WHERE task_id = %(task_id)s ORDER BY attempt_no;

-- name: attempt_get_secret
-- The key a callback for this attempt must be signed with.
SELECT callback_secret, executor, task_id FROM task_attempts WHERE id = %(attempt_id)s;

-- name: attempt_task_id
-- Which task an attempt belongs to (immutable, so read before locking the task row).
SELECT task_id FROM task_attempts WHERE id = %(attempt_id)s;

-- name: attempt_lock
-- The attempt row, locked after its task row.
SELECT * FROM task_attempts WHERE id = %(attempt_id)s FOR UPDATE;

-- name: attempt_touch_heartbeat
-- Notes that the attempt is alive.
UPDATE task_attempts SET heartbeat_at = coalesce(%(now)s, now())
WHERE id = %(attempt_id)s AND status = 'processing';

-- name: attempt_record_usage
-- Spend is recorded once per attempt: a second report of it changes nothing.
UPDATE task_attempts SET
    input_tokens = %(input_tokens)s,
    output_tokens = %(output_tokens)s,
    llm_cost_usd = %(llm_cost_usd)s,
    compute_cost_usd = coalesce(%(compute_cost_usd)s, compute_cost_usd),
    usage_recorded_at = coalesce(%(now)s, now())
WHERE id = %(attempt_id)s AND usage_recorded_at IS NULL
RETURNING id;

-- name: attempt_note_report
-- Remembers what the attempt reported (replays of it are duplicates) and its run and trace ids.
UPDATE task_attempts SET
    reported_status = %(status)s,
    callbacks_received = callbacks_received + 1,
    job_run_id = coalesce(job_run_id, %(run_id)s),
    trace_id = coalesce(trace_id, %(trace_id)s)
WHERE id = %(attempt_id)s;

-- name: attempt_count_replay
-- A replayed callback changes nothing but this counter.
UPDATE task_attempts SET callbacks_received = callbacks_received + 1 WHERE id = %(attempt_id)s;

-- name: attempt_finish
-- Ends an attempt that is still open (processing, or lost to the sweeper but reporting late).
UPDATE task_attempts SET
    status = %(status)s::attempt_status,
    error = coalesce(%(error)s, error),
    finished_at = coalesce(%(now)s, now())
WHERE id = %(attempt_id)s AND status IN ('processing', 'lost');

-- name: attempt_supersede_others
-- Once a task is completed, its other open attempts lose: their executors should stop them.
UPDATE task_attempts SET status = 'superseded', finished_at = coalesce(%(now)s, now())
WHERE task_id = %(task_id)s AND id <> %(attempt_id)s AND status = 'processing'
RETURNING id;

-- name: attempt_cancel_open
-- A cancelled task's running attempts are cancelled with it.
UPDATE task_attempts SET status = 'cancelled', finished_at = now(), error = 'task cancelled'
WHERE task_id = %(task_id)s AND status = 'processing'
RETURNING id;

-- name: attempt_hand_back
-- Graceful shutdown: the worker gives a task back at once, without spending its attempt budget.
WITH given AS (
    UPDATE task_attempts SET status = 'handed_back', finished_at = now(),
                             error = 'worker shut down before the attempt finished'
    WHERE id = %(attempt_id)s AND status = 'processing'
    RETURNING task_id
)
UPDATE tasks t SET status = 'enqueued', attempt_base = t.attempt_base + 1, run_after = now(),
                   locked_by = NULL, lease_expires_at = NULL, updated_at = now()
FROM given g
WHERE t.id = g.task_id AND t.status = 'processing' AND t.current_attempt_id = %(attempt_id)s
RETURNING t.id;

-- name: attempt_set_executor_info
-- The executor's handle on a running attempt: process id or job run id.
UPDATE task_attempts SET pid = coalesce(%(pid)s, pid), job_run_id = coalesce(%(job_run_id)s, job_run_id),
                         executor = coalesce(%(executor)s, executor)
WHERE id = %(attempt_id)s;

-- name: attempt_record_compute
-- Compute measured by the executor (wall and CPU seconds, cost, DBUs), kept apart from LLM spend.
UPDATE task_attempts SET
    compute_seconds = coalesce(%(compute_seconds)s, compute_seconds),
    compute_cost_usd = coalesce(%(compute_cost_usd)s, compute_cost_usd),
    dbus = coalesce(%(dbus)s, dbus)
WHERE id = %(attempt_id)s;
