-- name: task_lock_for_attempts
-- The tasks of the attempts a worker saw end, locked in task id order (so batches never deadlock
-- each other), with what each attempt and task stand at; a task's attempts in id order.
SELECT a.id AS attempt_id, a.task_id, a.status::text AS attempt_status, a.reported_status,
       t.status::text AS task_status, t.agent
FROM task_attempts a JOIN tasks t ON t.id = a.task_id
WHERE a.id = ANY(%(attempt_ids)s::bigint[])
ORDER BY t.id, a.id
FOR UPDATE OF t;

-- name: task_complete_batch_from_attempts
-- Settles ended runs together, their tasks locked by task_lock_for_attempts: records each
-- attempt's measured compute and, where its report is a plain completion (`complete`) of an
-- attempt that never reported, for a task that is not terminal, applies it as
-- attempt_note_report and task_complete_from_attempt do for one: spend recorded once, the task
-- completed, its other open attempts superseded. One attempt per task per call: the task's first
-- here (a second run of the same task is settled by the next call). One statement, so one event
-- notification. Every table is reached through an index on the batch's ids, and the caller turns
-- nested loops off for it: a batch's rows are joined by hash, never row by row.
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(reports)s::jsonb) AS r(
        attempt_id bigint, complete boolean, result jsonb, confidence real,
        pages integer, has_usage boolean, input_tokens bigint, output_tokens bigint,
        llm_cost_usd numeric, report_compute_cost_usd numeric, run_id text, trace_id text,
        compute_seconds double precision, cpu_seconds double precision, compute_cost_usd numeric,
        dbus numeric, compute_state text, llm_unpriced boolean)
), chosen AS (
    SELECT DISTINCT ON (a.task_id) i.*, a.task_id, a.status::text AS attempt_status, a.reported_status
    FROM input i JOIN task_attempts a ON a.id = i.attempt_id
    WHERE a.id = ANY(%(attempt_ids)s::bigint[])  -- found by primary key
    ORDER BY a.task_id, a.id
), done AS (
    UPDATE tasks t SET
        status = 'completed', result = i.result, confidence = i.confidence, error = NULL,
        current_attempt_id = i.attempt_id, locked_by = NULL, lease_expires_at = NULL,
        pages = coalesce(i.pages, t.pages),
        finished_at = coalesce(%(now)s, now()), updated_at = coalesce(%(now)s, now())
    FROM chosen i
    WHERE t.id = i.task_id AND t.id = ANY(ARRAY(SELECT task_id FROM chosen))  -- found by primary key
      AND i.complete AND i.reported_status IS NULL AND i.attempt_status IN ('processing', 'lost')
      AND t.status IN ('enqueued', 'processing')
    RETURNING t.id, i.attempt_id
), settled AS (
    UPDATE task_attempts a SET
        compute_seconds = coalesce(i.compute_seconds, a.compute_seconds),
        cpu_seconds = coalesce(i.cpu_seconds, a.cpu_seconds),
        dbus = coalesce(i.dbus, a.dbus),
        compute_state = CASE WHEN a.compute_state IN ('billed', 'final', 'unbilled') THEN a.compute_state
                             ELSE coalesce(i.compute_state, a.compute_state) END,
        llm_unpriced = CASE WHEN d.id IS NOT NULL AND i.has_usage AND a.usage_recorded_at IS NULL
                            THEN coalesce(i.llm_unpriced, false) ELSE a.llm_unpriced END,
        compute_cost_usd = CASE WHEN d.id IS NOT NULL AND i.has_usage AND a.usage_recorded_at IS NULL
                                THEN coalesce(i.report_compute_cost_usd, i.compute_cost_usd, a.compute_cost_usd)
                                ELSE coalesce(i.compute_cost_usd, a.compute_cost_usd) END,
        input_tokens = CASE WHEN d.id IS NOT NULL AND i.has_usage AND a.usage_recorded_at IS NULL
                            THEN i.input_tokens ELSE a.input_tokens END,
        output_tokens = CASE WHEN d.id IS NOT NULL AND i.has_usage AND a.usage_recorded_at IS NULL
                             THEN i.output_tokens ELSE a.output_tokens END,
        llm_cost_usd = CASE WHEN d.id IS NOT NULL AND i.has_usage AND a.usage_recorded_at IS NULL
                            THEN i.llm_cost_usd ELSE a.llm_cost_usd END,
        usage_recorded_at = CASE WHEN d.id IS NOT NULL AND i.has_usage AND a.usage_recorded_at IS NULL
                                 THEN coalesce(%(now)s, now()) ELSE a.usage_recorded_at END,
        reported_status = CASE WHEN d.id IS NOT NULL THEN 'completed' ELSE a.reported_status END,
        callbacks_received = a.callbacks_received + (d.id IS NOT NULL)::int,
        job_run_id = CASE WHEN d.id IS NOT NULL THEN coalesce(a.job_run_id, i.run_id) ELSE a.job_run_id END,
        trace_id = CASE WHEN d.id IS NOT NULL THEN coalesce(a.trace_id, i.trace_id) ELSE a.trace_id END,
        status = CASE WHEN d.id IS NOT NULL THEN 'completed' ELSE a.status END,
        error = CASE WHEN d.id IS NOT NULL THEN NULL ELSE a.error END,
        finished_at = CASE WHEN d.id IS NOT NULL THEN coalesce(%(now)s, now()) ELSE a.finished_at END
    FROM chosen i LEFT JOIN done d ON d.attempt_id = i.attempt_id
    WHERE a.id = i.attempt_id AND a.id = ANY(%(attempt_ids)s::bigint[])  -- found by primary key
    RETURNING a.id
), superseded AS (
    UPDATE task_attempts s SET status = 'superseded', finished_at = coalesce(%(now)s, now())
    FROM done d
    -- status::text: found through the task's attempts, not by walking the partial index of
    -- processing attempts, which holds the entries of every attempt settled since the last vacuum.
    WHERE s.task_id = d.id AND s.task_id = ANY(ARRAY(SELECT id FROM done))
      AND s.id <> d.attempt_id AND s.status::text = 'processing'
      AND s.id NOT IN (SELECT attempt_id FROM input)
    RETURNING s.id, s.task_id
)
SELECT d.id AS task_id, d.attempt_id,
       coalesce((SELECT array_agg(s.id ORDER BY s.id) FROM superseded s WHERE s.task_id = d.id),
                '{}') AS superseded_ids,
       (SELECT count(*) FROM settled) AS settled
FROM done d;
