-- name: task_edit_for_retry
-- Edit and retry: the agent and run settings (extractor, model) its next runs use, with the edit
-- (who, when, each field from and to) appended to its record. The task is locked by the caller.
UPDATE tasks SET agent = %(agent)s, run_overrides = %(run_overrides)s,
                 edits = edits || jsonb_build_array(jsonb_build_object(
                     'at', coalesce(%(now)s, now()), 'by', %(actor)s::text, 'changes', %(changes)s::jsonb)),
                 updated_at = coalesce(%(now)s, now())
WHERE id = %(task_id)s
RETURNING *;

-- name: tasks_first_analyze_due
-- Whether the tasks table was never analyzed (a new database) and already holds at least
-- %(bytes)s bytes: enqueue_many then gathers its statistics itself (see FIRST_ANALYZE_BYTES).
SELECT c.reltuples < 0 AND pg_relation_size(c.oid) >= %(bytes)s AS due
FROM pg_class c
WHERE c.oid = 'tasks'::regclass;

-- name: tasks_first_analyze
-- Gathers the tasks table's statistics, skipping it while another holds it (autovacuum, say).
ANALYZE (SKIP_LOCKED) tasks;

-- name: task_insert_batch
-- Enqueues many tasks in one statement (one for a single task too, and a retry's re-extraction
-- child, %(retried_by)s naming who asked): the arrays hold one entry per task, in order. The actor is set first, in the same transaction, for the event log; the
-- statement trigger logs the events and notifies once. Unknown agents or parents fail it whole.
WITH actor AS (
    SELECT set_config('quire.actor', coalesce(%(submitted_by)s, ''), true) AS actor
)
INSERT INTO tasks (agent, customer, priority, document_uri, document_name, document_sha256,
                   document_bytes, document_chars, pages, estimated_tokens, estimate_is_static, max_attempts,
                   parent_id, batch_id, held, scanned, ocr_work, run_overrides, submitted_by, retried_by, run_after,
                   created_at, updated_at)
SELECT r.agent, r.customer, r.priority, r.document_uri, r.document_name, r.document_sha256,
       r.document_bytes, r.document_chars, r.pages, r.estimated_tokens, r.estimate_is_static, r.max_attempts,
       r.parent_id, r.batch_id, r.held, r.scanned, r.ocr_work, coalesce(r.run_overrides::jsonb, '{}'::jsonb),
       %(submitted_by)s, %(retried_by)s,
       coalesce(%(now)s, now()), coalesce(%(now)s, now()), coalesce(%(now)s, now())
FROM actor CROSS JOIN unnest(%(agent)s::text[], %(customer)s::text[], %(priority)s::smallint[],
                             %(document_uri)s::text[], %(document_name)s::text[],
                             %(document_sha256)s::text[], %(document_bytes)s::bigint[],
                             %(document_chars)s::integer[], %(pages)s::integer[],
                             %(estimated_tokens)s::integer[],
                             %(estimate_is_static)s::boolean[], %(max_attempts)s::integer[],
                             %(parent_id)s::bigint[], %(batch_id)s::bigint[], %(held)s::boolean[],
                             %(scanned)s::boolean[], %(ocr_work)s::real[], %(run_overrides)s::text[])
     WITH ORDINALITY AS r(agent, customer, priority, document_uri, document_name, document_sha256,
                          document_bytes, document_chars, pages, estimated_tokens, estimate_is_static, max_attempts,
                          parent_id, batch_id, held, scanned, ocr_work, run_overrides, ord)
ORDER BY r.ord
RETURNING *;

-- name: task_get
-- One task by id.
SELECT * FROM tasks WHERE id = %(task_id)s;

-- name: task_lock
-- One task by id, locked: every state transition outside the claim starts here, so writers of the
-- same task take turns (lock order everywhere: task row, then its attempt rows).
SELECT * FROM tasks WHERE id = %(task_id)s FOR UPDATE;

-- name: task_lock_for_attempt
-- The task an attempt belongs to, locked. Every writer of an attempt's status holds its task's
-- lock first, so statements after this one read the attempt as it stands.
SELECT t.*
FROM task_attempts a JOIN tasks t ON t.id = a.task_id
WHERE a.id = %(attempt_id)s
FOR UPDATE OF t;

-- name: task_candidates_for_admission
-- The head of an agent's claimable backlog in claim order, locked, for a throttled admission,
-- each with the tokens its claim will reserve (as task_claim_batch computes them).
-- Fair share: ranked by quire_claim_candidates (customers take turns within a priority). As in
-- task_claim_batch, the head is read into arrays first and the tasks are then fetched by primary
-- key, locked in a subquery of their own (so no row of the arrays rides along with each task):
-- joined to the candidates, the planner hashed a scan of the whole tasks table (0.3 s a claim in
-- a drain of a few thousand tasks, and the table's size at any depth).
WITH head AS (
    SELECT array_agg(c.id ORDER BY c.priority DESC, c.fair_rank, c.created_at, c.id) AS ids,
           array_agg(c.fair_rank ORDER BY c.priority DESC, c.fair_rank, c.created_at, c.id) AS ranks
    FROM quire_claim_candidates(%(agent)s, coalesce(%(now)s, now()), %(scan)s) c
)
SELECT c.id, c.priority, c.waiting_since, c.estimated_tokens
FROM head CROSS JOIN LATERAL (
    SELECT t.id, t.priority, t.waiting_since, t.created_at,
           head.ranks[array_position(head.ids, t.id)] AS fair_rank,
           CASE WHEN t.estimate_is_static
                THEN coalesce(quire_tokens_on_line(l.text_a, l.text_b, l.page_a, l.page_b, t.pages, t.document_bytes,
                                                   t.document_chars), t.estimated_tokens)
                ELSE t.estimated_tokens END AS estimated_tokens
    FROM tasks t
    LEFT JOIN quire_token_line(%(agent)s, NULL) l ON true  -- the agent's learned line, read once
    -- status::text and agent || '': no claim index nor the agent's submission index matches, so
    -- these rows are found by primary key.
    WHERE t.id = ANY(head.ids) AND t.agent || '' = %(agent)s AND t.status::text = 'enqueued' AND NOT t.held
      AND t.run_after <= coalesce(%(now)s, now())
    ORDER BY t.priority DESC, 5, t.created_at, t.id
    LIMIT %(scan)s
    FOR UPDATE OF t SKIP LOCKED
) c
ORDER BY c.priority DESC, c.fair_rank, c.created_at, c.id;

-- name: task_mark_waiting
-- Starts the starvation clock of tasks refused admission for lack of token budget.
UPDATE tasks SET waiting_since = coalesce(%(now)s, now())
WHERE id = ANY(%(ids)s::bigint[]) AND waiting_since IS NULL;

-- name: task_claim_batch
-- Claims tasks in priority order and opens an attempt for each, in one statement, for one agent
-- (%(agent)s) or for every agent whose executor has free slots here. Each (executor, pool, slots)
-- triple of the arrays gives slots to a pool of executors (a NULL executor matches any agent);
-- the pool's slots go to its agents' best tasks. %(ids)s, when given, restricts the claim to tasks
-- that admission already chose and locked; %(unthrottled_only)s lets it run alone, as its own
-- transaction, for agents without limits.
WITH seed AS MATERIALIZED (
    -- One draw of randomness per claim, not two per task (gen_random_uuid takes about 3 µs a call:
    -- two per task were about a tenth of a claim). Each attempt's callback secret is the SHA-256 of
    -- its task id, its attempt number and this 244-bit key, which never leaves the statement.
    SELECT gen_random_uuid()::text || gen_random_uuid()::text AS key
), wanted AS (
    SELECT a.name, a.lease_seconds, a.executor, a.settings ->> 'extractor' AS extractor, s.pool, s.slots,
           -- What the agent's documents were learned to cost (NULL until learned), read once here.
           l.text_a, l.text_b, l.page_a, l.page_b
    FROM agents a
    JOIN unnest(%(executors)s::text[], %(pools)s::text[], %(slots)s::int[]) AS s(executor, pool, slots)
      ON s.executor IS NULL OR s.executor = a.executor
    LEFT JOIN LATERAL quire_token_line(a.name, NULL) l ON true
    WHERE a.config_error IS NULL AND a.halt_reason IS NULL  -- a misconfigured or halted agent's tasks wait
      AND (a.paused_at IS NULL OR a.paused_until <= coalesce(%(now)s, now()))  -- so do a paused one's
      AND (%(agent)s::text IS NULL OR a.name = %(agent)s::text)
      AND (NOT %(unthrottled_only)s OR (a.max_concurrent_tasks IS NULL AND a.max_tpm IS NULL
                                        AND a.effective_tpm IS NULL AND a.effective_concurrency IS NULL))
), candidates AS (
    -- Each agent's claimable head in claim order, locked: fair share across customers
    -- (quire_claim_candidates, a bounded set) or, under admission, exactly the ids it chose.
    -- The head is read into arrays first (in claim order, a little more than the slots), and the
    -- tasks are then fetched by primary key: no join order the planner could get wrong while the
    -- table's statistics lag behind a fast-changing backlog.
    SELECT c.id, c.priority, c.fair_rank, c.created_at, w.name AS agent, w.pool, w.slots
    FROM wanted w CROSS JOIN LATERAL (
        SELECT coalesce(%(ids)s::bigint[], array_agg(f.id ORDER BY f.priority DESC, f.fair_rank, f.created_at, f.id))
                   AS ids,
               CASE WHEN %(ids)s::bigint[] IS NULL
                    THEN array_agg(f.fair_rank ORDER BY f.priority DESC, f.fair_rank, f.created_at, f.id)
                    ELSE array_fill(0::bigint, ARRAY[cardinality(%(ids)s::bigint[])]) END AS ranks
        FROM (SELECT * FROM quire_claim_candidates(w.name, coalesce(%(now)s, now()), w.slots * 2 + 8) q
              WHERE %(ids)s::bigint[] IS NULL
              ORDER BY q.priority DESC, q.fair_rank, q.created_at, q.id
              LIMIT w.slots * 2 + 8) f
        OFFSET 0
    ) head CROSS JOIN LATERAL (
        SELECT t.id, t.priority, head.ranks[array_position(head.ids, t.id)] AS fair_rank, t.created_at
        FROM tasks t
        -- status::text: a comparison no partial claim index matches, so these few rows are found
        -- by primary key, never by walking a claim index past the entries of claimed tasks; and
        -- agent || '', which the agent's submission index does not match (a generic plan on
        -- PostgreSQL 15 was once measured walking every task of the agent through such an index).
        WHERE t.id = ANY(head.ids) AND t.agent || '' = w.name AND t.status::text = 'enqueued' AND NOT t.held
          AND t.run_after <= coalesce(%(now)s, now())
        ORDER BY t.priority DESC, 3, t.created_at, t.id
        LIMIT w.slots
        FOR UPDATE OF t SKIP LOCKED
    ) c
), picked AS (
    -- A pool's slots go to the best candidates of all its agents (a few rows are sorted here).
    SELECT r.id, r.agent FROM (
        SELECT id, agent, slots,
               row_number() OVER (PARTITION BY pool ORDER BY priority DESC, fair_rank, created_at, id) AS n
        FROM candidates
    ) r
    WHERE r.n <= r.slots
), opened AS (
    INSERT INTO task_attempts (task_id, attempt_no, agent, worker_id, executor, extractor, callback_secret,
                               estimated_tokens, started_at, heartbeat_at)
    SELECT t.id, t.attempt_count + 1, t.agent, %(worker_id)s,
           coalesce(%(executor)s, w.executor), coalesce(t.run_overrides ->> 'extractor', w.extractor),
           encode(sha256((t.id::text || '.' || (t.attempt_count + 1)::text || '.' || seed.key)::bytea), 'hex'),
           -- The reservation: what this agent's documents were learned to cost, else the estimate.
           CASE WHEN t.estimate_is_static
                THEN coalesce(quire_tokens_on_line(w.text_a, w.text_b, w.page_a, w.page_b, t.pages, t.document_bytes,
                                                   t.document_chars), t.estimated_tokens)
                ELSE t.estimated_tokens END,
           -- clock_timestamp, not now(): the attempt starts after the admission lock was won
           coalesce(%(now)s, clock_timestamp()), coalesce(%(now)s, clock_timestamp())
    FROM tasks t JOIN picked p USING (id) JOIN wanted w ON w.name = t.agent CROSS JOIN seed
    RETURNING id, task_id, attempt_no, callback_secret
)
UPDATE tasks t SET
    status = 'processing',
    attempt_count = o.attempt_no,
    current_attempt_id = o.id,
    locked_by = %(worker_id)s,
    lease_expires_at = coalesce(%(now)s, now())
                       + make_interval(secs => coalesce(%(lease_seconds)s, w.lease_seconds)),
    started_at = coalesce(t.started_at, coalesce(%(now)s, now())),
    waiting_since = NULL,
    updated_at = coalesce(%(now)s, now())
FROM opened o, wanted w
WHERE t.id = o.task_id AND w.name = t.agent
RETURNING t.*, o.id AS claim_attempt_id, o.attempt_no AS claim_attempt_no,
          o.callback_secret AS claim_callback_secret;

-- name: task_extend_lease_if_current
-- Heartbeat: extends the lease while this attempt is its task's current one and it is processing
-- (even past an expired lease that no sweep has taken back yet).
UPDATE tasks t SET
    lease_expires_at = greatest(t.lease_expires_at,
                                coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s))
WHERE t.id = %(task_id)s AND t.current_attempt_id = %(attempt_id)s AND t.status = 'processing'
RETURNING t.lease_expires_at;

-- name: task_requeue_expired
-- Sweeper: takes back tasks whose lease expired; each goes back to the queue with backoff, or
-- fails once its attempt budget is spent. The lost attempt is marked so in the same statement.
-- A task whose current attempt is a job run (a job run id is stored) is left alone: the run lives
-- on without any worker and may still report, so the run reconciler asks it how it ended.
WITH expired AS (
    SELECT id, current_attempt_id, attempt_count - attempt_base AS spent, max_attempts
    FROM tasks
    WHERE status = 'processing' AND lease_expires_at < coalesce(%(now)s, now())
      AND NOT EXISTS (SELECT 1 FROM task_attempts d
                      WHERE d.id = tasks.current_attempt_id AND d.status = 'processing'
                        AND d.job_run_id IS NOT NULL)
    ORDER BY lease_expires_at
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), lost AS (
    UPDATE task_attempts a SET
        status = 'lost', finished_at = coalesce(%(now)s, now()),
        error = 'lease expired without heartbeat or report'
    FROM expired e
    WHERE a.id = e.current_attempt_id AND a.status = 'processing'
    RETURNING a.id
)
UPDATE tasks t SET
    status = CASE WHEN e.spent >= e.max_attempts THEN 'failed' ELSE 'enqueued' END::task_status,
    run_after = CASE WHEN e.spent >= e.max_attempts THEN t.run_after
                     ELSE coalesce(%(now)s, now())
                          + quire_backoff(e.spent, %(backoff_base)s, %(backoff_cap)s) END,
    finished_at = CASE WHEN e.spent >= e.max_attempts THEN coalesce(%(now)s, now()) END,
    error = CASE WHEN e.spent >= e.max_attempts
                 THEN format('lease expired on attempt %%s of %%s; attempt budget spent', e.spent, e.max_attempts)
                 ELSE format('lease expired on attempt %%s of %%s; re-enqueued', e.spent, e.max_attempts) END,
    locked_by = NULL,
    lease_expires_at = NULL,
    updated_at = coalesce(%(now)s, now())
FROM expired e
WHERE t.id = e.id
RETURNING t.id, t.status;

-- name: task_hand_back_from_attempt
-- Graceful shutdown, or a task claimed ahead that found no slot: the worker gives a task back at
-- once, without spending its attempt budget (task row first, then the attempt: the lock order
-- every transition keeps).
WITH given AS (
    UPDATE tasks t SET status = 'enqueued', attempt_base = t.attempt_base + 1,
                       run_after = coalesce(%(now)s, now()), locked_by = NULL, lease_expires_at = NULL,
                       updated_at = coalesce(%(now)s, now())
    WHERE t.id = (SELECT task_id FROM task_attempts WHERE id = %(attempt_id)s)
      AND t.status = 'processing' AND t.current_attempt_id = %(attempt_id)s
    RETURNING t.id
)
UPDATE task_attempts a SET status = 'handed_back', finished_at = coalesce(%(now)s, now()),
                           error = coalesce(%(reason)s::text, 'worker shut down before the attempt finished')
FROM given g
WHERE a.id = %(attempt_id)s AND a.status = 'processing'
RETURNING g.id;

-- name: task_cancel_if_live
-- Cancels a task that is enqueued or processing; a later callback is then ignored.
UPDATE tasks SET
    status = 'cancelled', cancelled_by = %(actor)s, locked_by = NULL, lease_expires_at = NULL,
    finished_at = coalesce(%(now)s, now()), updated_at = coalesce(%(now)s, now())
WHERE id = %(task_id)s AND status IN ('enqueued', 'processing')
RETURNING *;

-- name: task_reopen_if_ended
-- Retry of a failed or cancelled task: back to the queue with a fresh attempt budget, history kept.
UPDATE tasks SET
    status = 'enqueued', attempt_base = attempt_count, run_after = coalesce(%(now)s, now()), waiting_since = NULL,
    priority = coalesce(%(priority)s, priority), retried_by = %(actor)s,
    result = NULL, confidence = NULL, error = NULL, finished_at = NULL,
    locked_by = NULL, lease_expires_at = NULL, updated_at = coalesce(%(now)s, now())
WHERE id = %(task_id)s AND status IN ('failed', 'cancelled')
RETURNING *;

-- name: task_events_for_task
-- A task's timeline: every state change in order, with who caused it where known.
SELECT id, status, prev_status, actor, at FROM task_events WHERE task_id = %(task_id)s ORDER BY id;

-- name: task_wait_reason_list
-- Why each of a page of enqueued tasks waits (quire_wait_reasons: held, agent paused, retry
-- backoff, customer budget, concurrency cap, token budget, else its turn), with until when.
SELECT * FROM quire_wait_reasons(%(ids)s::bigint[], coalesce(%(now)s, now()));
