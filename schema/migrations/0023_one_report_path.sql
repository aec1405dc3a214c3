-- One place where an agent's report changes its attempt and its task: the callback endpoint applies
-- a batch of one, the worker's settlement a batch of the runs it saw end.

-- Applies reports to their attempts, and records the compute the worker measured for each, their
-- tasks locked by the caller (task row first, then attempts: the lock order of every transition).
-- p_reports: one JSON object per attempt (attempt_id, the report's status and fields, or a NULL
-- status for compute alone). One attempt per task per call: the task's first by attempt id (a
-- second of the same task is the caller's to apply next). Per report, `kind` says what it did:
--   none       nothing of the report (no status, or p_fresh_only and the attempt reported before,
--              is no longer open, or its task ended): its compute only
--   duplicate  the attempt reported this status before: counted, nothing else
--   ignored    its task is terminal: the attempt's spend and the page count only
--   completed  the task completed by it, whatever attempt it came from; its other open attempts
--              superseded
--   failed     a failure of the current attempt of a processing task: back to the queue with
--              backoff while `retryable` and the attempt budget lasts, else failed for good
--   recorded   a failure of any other attempt: that attempt's row only (fencing)
-- Spend counts once per attempt: a report's tokens and cost are kept unless the attempt's were
-- recorded before. in_flight: the agent's processing tasks before this call, for a report that met
-- rate limits (the back-off reads it). One UPDATE of tasks, so one event notification.
CREATE FUNCTION quire_apply_reports(p_reports jsonb, p_attempt_ids bigint[], p_fresh_only boolean,
                                    p_now timestamptz, p_backoff_base double precision,
                                    p_backoff_cap double precision)
RETURNS TABLE (attempt_id bigint, task_id bigint, agent text, kind text, previously_reported text,
               usage_recorded boolean, task_status text, superseded_ids bigint[], in_flight bigint)
LANGUAGE plpgsql VOLATILE SET jit TO 'off' AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_reports) AS r(
            attempt_id bigint, status text, result jsonb, confidence real, error text, retryable boolean,
            rate_limited boolean, pages integer, has_usage boolean, input_tokens bigint,
            output_tokens bigint, llm_cost_usd numeric, report_compute_cost_usd numeric,
            llm_unpriced boolean, run_id text, trace_id text, compute_seconds double precision,
            cpu_seconds double precision, compute_cost_usd numeric, dbus numeric, compute_state text)
    ), attempt AS (
        SELECT i.*, a.task_id, a.status::text AS attempt_status, a.reported_status AS previously,
               a.usage_recorded_at IS NULL AS unrecorded
        FROM input i JOIN task_attempts a ON a.id = i.attempt_id
        WHERE a.id = ANY(p_attempt_ids)  -- found by primary key
    ), chosen AS (
        SELECT DISTINCT ON (x.task_id) x.*, t.status::text AS was, t.agent AS task_agent,
               t.status = 'processing' AND t.current_attempt_id = x.attempt_id AS is_current,
               coalesce(x.retryable, false) AND t.attempt_count - t.attempt_base < t.max_attempts AS may_retry
        FROM attempt x JOIN tasks t ON t.id = x.task_id
        WHERE t.id = ANY(ARRAY(SELECT task_id FROM attempt))  -- found by primary key
        ORDER BY x.task_id, x.attempt_id
    ), classified AS (
        SELECT c.*, CASE
                   WHEN c.status IS NULL THEN 'none'
                   WHEN p_fresh_only AND NOT (c.previously IS NULL AND c.attempt_status IN ('processing', 'lost')
                                              AND c.was IN ('enqueued', 'processing')) THEN 'none'
                   WHEN c.previously = c.status THEN 'duplicate'
                   WHEN c.was IN ('completed', 'failed', 'cancelled') THEN 'ignored'
                   WHEN c.status = 'completed' THEN 'completed'
                   WHEN c.is_current THEN 'failed'
                   ELSE 'recorded' END AS what
        FROM chosen c
    ), k AS (
        SELECT c.*, c.what <> 'none' AND coalesce(c.has_usage, false) AND c.unrecorded AS record_usage,
               c.what IN ('failed', 'recorded') AND c.attempt_status IN ('processing', 'lost') AS closes,
               c.what = 'failed' AND c.may_retry AS requeue
        FROM classified c
    ), moved AS (
        UPDATE tasks t SET
            status = CASE k.what WHEN 'completed' THEN 'completed'
                                 WHEN 'failed' THEN CASE WHEN k.requeue THEN 'enqueued' ELSE 'failed' END
                                 ELSE t.status::text END::task_status,
            result = CASE WHEN k.what = 'completed' THEN k.result ELSE t.result END,
            confidence = CASE WHEN k.what = 'completed' THEN k.confidence ELSE t.confidence END,
            error = CASE k.what WHEN 'completed' THEN NULL WHEN 'failed' THEN k.error ELSE t.error END,
            current_attempt_id = CASE WHEN k.what = 'completed' THEN k.attempt_id ELSE t.current_attempt_id END,
            locked_by = CASE WHEN k.what IN ('completed', 'failed') THEN NULL ELSE t.locked_by END,
            lease_expires_at = CASE WHEN k.what IN ('completed', 'failed') THEN NULL ELSE t.lease_expires_at END,
            pages = coalesce(k.pages, t.pages),
            run_after = CASE WHEN k.requeue
                             THEN coalesce(p_now, now())
                                  + quire_backoff(t.attempt_count - t.attempt_base, p_backoff_base, p_backoff_cap)
                             ELSE t.run_after END,
            finished_at = CASE WHEN k.requeue THEN NULL
                               WHEN k.what IN ('completed', 'failed') THEN coalesce(p_now, now())
                               ELSE t.finished_at END,
            updated_at = CASE WHEN k.what IN ('completed', 'failed') THEN coalesce(p_now, now())
                              ELSE t.updated_at END
        FROM k
        WHERE t.id = k.task_id AND t.id = ANY(ARRAY(SELECT task_id FROM k))  -- found by primary key
          AND (k.what IN ('completed', 'failed')
               OR (k.what IN ('ignored', 'recorded') AND k.pages IS NOT NULL AND t.pages IS DISTINCT FROM k.pages))
        RETURNING t.id, t.status::text AS status
    ), noted AS (
        UPDATE task_attempts a SET
            compute_seconds = coalesce(k.compute_seconds, a.compute_seconds),
            cpu_seconds = coalesce(k.cpu_seconds, a.cpu_seconds),
            dbus = coalesce(k.dbus, a.dbus),
            compute_state = CASE WHEN a.compute_state IN ('billed', 'final', 'unbilled') THEN a.compute_state
                                 ELSE coalesce(k.compute_state, a.compute_state) END,
            llm_unpriced = CASE WHEN k.record_usage THEN coalesce(k.llm_unpriced, false) ELSE a.llm_unpriced END,
            compute_cost_usd = CASE WHEN k.record_usage
                                    THEN coalesce(k.report_compute_cost_usd, k.compute_cost_usd, a.compute_cost_usd)
                                    ELSE coalesce(k.compute_cost_usd, a.compute_cost_usd) END,
            input_tokens = CASE WHEN k.record_usage THEN k.input_tokens ELSE a.input_tokens END,
            output_tokens = CASE WHEN k.record_usage THEN k.output_tokens ELSE a.output_tokens END,
            llm_cost_usd = CASE WHEN k.record_usage THEN k.llm_cost_usd ELSE a.llm_cost_usd END,
            usage_recorded_at = CASE WHEN k.record_usage THEN coalesce(p_now, now()) ELSE a.usage_recorded_at END,
            reported_status = CASE WHEN k.what <> 'none' THEN k.status ELSE a.reported_status END,
            callbacks_received = a.callbacks_received + (k.what <> 'none')::int,
            job_run_id = CASE WHEN k.what <> 'none' THEN coalesce(a.job_run_id, k.run_id) ELSE a.job_run_id END,
            trace_id = CASE WHEN k.what <> 'none' THEN coalesce(a.trace_id, k.trace_id) ELSE a.trace_id END,
            -- Whatever became of a completing attempt before (lost, handed back, an earlier stale
            -- failure), its result is the one the task keeps, so it is the completed attempt.
            status = CASE WHEN k.what = 'completed' THEN 'completed'
                          WHEN k.closes THEN 'failed'
                          ELSE a.status::text END::attempt_status,
            error = CASE WHEN k.what = 'completed' THEN NULL
                         WHEN k.closes AND k.what = 'failed' THEN k.error
                         WHEN k.closes THEN coalesce(k.error, a.error)
                         ELSE a.error END,
            finished_at = CASE WHEN k.what = 'completed' OR k.closes THEN coalesce(p_now, now())
                               ELSE a.finished_at END
        FROM k
        WHERE a.id = k.attempt_id AND a.id = ANY(p_attempt_ids)  -- found by primary key
    ), superseded AS (
        UPDATE task_attempts s SET status = 'superseded', finished_at = coalesce(p_now, now())
        FROM k
        -- status::text: found through the task's attempts, not by walking the partial index of
        -- processing attempts, which holds the entries of every attempt settled since the last vacuum.
        WHERE k.what = 'completed' AND s.task_id = k.task_id
          AND s.task_id = ANY(ARRAY(SELECT task_id FROM k WHERE what = 'completed'))
          AND s.id <> k.attempt_id AND s.status::text = 'processing'
          AND s.id NOT IN (SELECT attempt_id FROM input)
        RETURNING s.id, s.task_id
    )
    SELECT k.attempt_id, k.task_id, k.task_agent, k.what, k.previously, k.record_usage,
           coalesce(m.status, k.was),
           coalesce((SELECT array_agg(s.id ORDER BY s.id) FROM superseded s WHERE s.task_id = k.task_id),
                    '{}'::bigint[]),
           -- Read before this statement's changes, as every part of one statement reads.
           CASE WHEN k.rate_limited
                THEN (SELECT count(*) FROM tasks p WHERE p.agent = k.task_agent AND p.status = 'processing') END
    FROM k LEFT JOIN moved m ON m.id = k.task_id
    ORDER BY k.attempt_id;
END $$;
