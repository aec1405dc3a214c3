-- Less work per task for Postgres in the claim and the settlement, each part counted in
-- instructions (valgrind's callgrind, on the claim and settlement backends; docs/BENCHMARKS.md):
-- the same work, none of it dropped.
--
-- Index entries no query reads. A btree keeps NULL keys, and each non-HOT update of a row (a task
-- is updated twice on its way through the queue, an attempt once) writes a new entry into every
-- index. No query looks for a task without a document hash or a customer, nor for an attempt by
-- an end it has not had: every reader of these three indexes names a value (= or = ANY, a range),
-- which implies NOT NULL, so the partial indexes serve them as before. A task without a hash or a
-- customer (a document enqueued by path, a single-tenant queue) now writes four index entries
-- fewer on its way, and an attempt one fewer when it opens.
DROP INDEX tasks_sha256_idx;
CREATE INDEX tasks_sha256_idx ON tasks (document_sha256) WHERE document_sha256 IS NOT NULL;
DROP INDEX tasks_customer_created_idx;
CREATE INDEX tasks_customer_created_idx ON tasks (customer, created_at) WHERE customer IS NOT NULL;
DROP INDEX task_attempts_finished_idx;
CREATE INDEX task_attempts_finished_idx ON task_attempts (agent, finished_at) WHERE finished_at IS NOT NULL;

-- The notification of new events, written as text: json_build_object per event, and a window
-- function to number them into chunks, cost about as much as the event rows themselves. The
-- payload is the same JSON list of {"e", "id", "a", "s", "p"} (without the spaces), in id order,
-- in chunks of 50. Callers pass the events in id order (their INSERT ... ORDER BY ... RETURNING),
-- so a chunk is a run of 50 in the arrays' order.
CREATE OR REPLACE FUNCTION quire_notify_new_events(ids bigint[], task_ids bigint[], agents text[],
                                                   statuses task_status[], prev_statuses task_status[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    body text;
    sent integer := 0;
BEGIN
    FOR body IN
        SELECT '[' || string_agg(concat('{"e":', e.id, ',"id":', e.task_id, ',"a":', to_json(e.agent),
                                        ',"s":"', e.status, '","p":',
                                        coalesce('"' || e.prev_status::text || '"', 'null'), '}'),
                                 ',' ORDER BY e.id) || ']'
        FROM unnest(ids, task_ids, agents, statuses, prev_statuses)
             WITH ORDINALITY AS e (id, task_id, agent, status, prev_status, n)
        GROUP BY (e.n - 1) / 50
        ORDER BY (e.n - 1) / 50
    LOOP
        PERFORM pg_notify('quire_tasks', body);
        sent := sent + 1;
    END LOOP;
    RETURN sent;
END $$;

-- Logged events published by id (a batch's release): the same payload, from the one function that
-- writes it.
CREATE OR REPLACE FUNCTION quire_notify_events(event_ids bigint[]) RETURNS void LANGUAGE sql AS $$
    SELECT quire_notify_new_events(array_agg(e.id ORDER BY e.id), array_agg(e.task_id ORDER BY e.id),
                                   array_agg(e.agent ORDER BY e.id), array_agg(e.status ORDER BY e.id),
                                   array_agg(e.prev_status ORDER BY e.id))
    FROM task_events e WHERE e.id = ANY(event_ids)
$$;

-- The reports as json, not jsonb: jsonb_in built a tree of every report's every key (about a
-- tenth of the settlement's work) only for json_to_recordset to take it apart again; json is read
-- once by its lexer, and only a report's result becomes jsonb. The body is migration 23's.
CREATE FUNCTION quire_apply_reports(p_reports json, p_attempt_ids bigint[], p_fresh_only boolean,
                                    p_now timestamptz, p_backoff_base double precision,
                                    p_backoff_cap double precision)
RETURNS TABLE (attempt_id bigint, task_id bigint, agent text, kind text, previously_reported text,
               usage_recorded boolean, task_status text, superseded_ids bigint[], in_flight bigint)
LANGUAGE plpgsql VOLATILE SET jit TO 'off' AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH input AS (
        SELECT * FROM json_to_recordset(p_reports) AS r(
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


-- The jsonb form stays for a caller of the version before (an app still running beside a new one
-- while it deploys): the same function.
CREATE OR REPLACE FUNCTION quire_apply_reports(p_reports jsonb, p_attempt_ids bigint[], p_fresh_only boolean,
                                               p_now timestamptz, p_backoff_base double precision,
                                               p_backoff_cap double precision)
RETURNS TABLE (attempt_id bigint, task_id bigint, agent text, kind text, previously_reported text,
               usage_recorded boolean, task_status text, superseded_ids bigint[], in_flight bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT * FROM quire_apply_reports(p_reports::json, p_attempt_ids, p_fresh_only, p_now, p_backoff_base,
                                      p_backoff_cap)
$$;
