-- name: task_ahead_higher_priority_bounded
-- Queued tasks of an agent at a higher priority, counted up to %(bound)s (an index range, never the
-- whole backlog); held tasks and customers over budget are not ahead of anyone.
SELECT count(*) AS n FROM (
    SELECT 1 FROM tasks t
    WHERE t.agent = %(agent)s AND t.status = 'enqueued' AND NOT t.held AND t.priority > %(priority)s
      AND coalesce(t.customer, '') NOT IN (SELECT customer FROM quire_customers_over_budget(coalesce(%(now)s, now())))
    LIMIT %(bound)s
) ahead;

-- name: task_fair_groups_at_priority
-- The customers with queued work at one priority of an agent (skip scan over the fair-share index),
-- each with its queued tasks counted up to %(count_bound)s, its recent service (as the claim ranks it; named
-- in_flight) and whether it is over budget.
WITH RECURSIVE grp AS (
    (SELECT coalesce(t.customer, '') AS ckey, 1 AS n
     FROM tasks t
     WHERE t.agent = %(agent)s AND t.status = 'enqueued' AND NOT t.held AND t.priority = %(priority)s
     ORDER BY t.priority DESC, coalesce(t.customer, '')
     LIMIT 1)
    UNION ALL
    SELECT nxt.ckey, g.n + 1
    FROM grp g CROSS JOIN LATERAL (
        SELECT coalesce(t.customer, '') AS ckey
        FROM tasks t
        WHERE t.agent = %(agent)s AND t.status = 'enqueued' AND NOT t.held AND t.priority = %(priority)s
          AND coalesce(t.customer, '') > g.ckey
        ORDER BY t.priority DESC, coalesce(t.customer, '')
        LIMIT 1
    ) nxt
    WHERE g.n < 256
)
SELECT g.ckey,
       (SELECT count(*) FROM (
            SELECT 1 FROM tasks t
            WHERE t.agent = %(agent)s AND t.status = 'enqueued' AND NOT t.held
              AND t.priority = %(priority)s AND coalesce(t.customer, '') = g.ckey
            LIMIT %(count_bound)s) q) AS queued,
       coalesce((SELECT f.served FROM quire_customer_served(%(agent)s) f WHERE f.ckey = g.ckey), 0) AS in_flight,
       g.ckey IN (SELECT customer FROM quire_customers_over_budget(coalesce(%(now)s, now()))) AS over_budget
FROM grp g;

-- name: task_fair_group_queue_list
-- One customer's queued tasks at one priority of an agent, in the order it claims them (bounded).
SELECT t.id, t.created_at FROM tasks t
WHERE t.agent = %(agent)s AND t.status = 'enqueued' AND NOT t.held
  AND t.priority = %(priority)s AND coalesce(t.customer, '') = %(ckey)s
ORDER BY t.created_at, t.id
LIMIT %(bound)s;

-- name: task_ahead_estimate
-- The planner's estimate of the tasks ahead of one: used past the counting bound, shown as "about".
EXPLAIN (FORMAT JSON)
SELECT 1 FROM tasks t
WHERE t.agent = %(agent)s AND t.status = 'enqueued' AND NOT t.held
  AND (t.priority > %(priority)s OR (t.priority = %(priority)s AND t.created_at < %(created_at)s));

-- name: task_queue_facts_by_ids
-- What a queue position needs of each task: agent, priority, customer, status, hold and age, and
-- whether its agent can run now (misconfigured or halted: never; paused by a Retry-After: later).
SELECT t.id, t.agent, t.priority, t.customer, t.status::text AS status, t.held, t.created_at, t.run_after,
       t.waiting_since, t.estimated_tokens, t.pages, t.batch_id,
       t.scanned, t.ocr_work,
       coalesce(t.customer, '') IN (SELECT customer FROM quire_customers_over_budget(coalesce(%(now)s, now())))
           AS over_budget,
       coalesce(a.config_error, a.halt_reason) AS agent_cannot_run,
       CASE WHEN a.throttled_until > coalesce(%(now)s, now())
            THEN extract(epoch FROM a.throttled_until - coalesce(%(now)s, now()))::float8 END AS agent_paused_seconds
FROM tasks t JOIN agents a ON a.name = t.agent
WHERE t.id = ANY(%(ids)s::bigint[]);

-- name: agent_learned_rates_one
-- What an agent's recent completed attempts teach: tokens against the static estimate, the output
-- share, wall and compute seconds against pages (sums for a least-squares line), and how much work
-- ran at once while any ran (summed wall seconds over the busy time, the union of their spans).
WITH recent AS (
    SELECT a.input_tokens, a.output_tokens, a.estimated_tokens, a.compute_seconds,
           a.started_at, a.finished_at,
           extract(epoch FROM a.finished_at - a.started_at)::float8 AS wall_s,
           greatest(coalesce(t.pages, 1), 1)::float8 AS pages
    FROM task_attempts a JOIN tasks t ON t.id = a.task_id
    WHERE a.agent = %(agent)s AND a.status = 'completed' AND a.finished_at IS NOT NULL
    ORDER BY a.id DESC
    LIMIT %(window)s
), spans AS (
    SELECT started_at, finished_at,
           max(finished_at) OVER (ORDER BY started_at, finished_at
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_until
    FROM recent
), busy AS (
    SELECT sum(extract(epoch FROM seg_end - seg_start))::float8 AS busy_s
    FROM (SELECT min(started_at) AS seg_start, max(finished_at) AS seg_end
          FROM (SELECT started_at, finished_at,
                       count(*) FILTER (WHERE busy_until IS NULL OR started_at > busy_until)
                           OVER (ORDER BY started_at, finished_at) AS seg
                FROM spans) s
          GROUP BY seg) segments
)
SELECT count(*) AS n,
       count(*) FILTER (WHERE input_tokens IS NOT NULL) AS n_usage,
       coalesce(sum(input_tokens + output_tokens) FILTER (WHERE input_tokens IS NOT NULL), 0)::float8 AS tokens,
       coalesce(sum(output_tokens) FILTER (WHERE input_tokens IS NOT NULL), 0)::float8 AS output_tokens,
       coalesce(sum(estimated_tokens) FILTER (WHERE input_tokens IS NOT NULL), 0)::float8 AS estimated_tokens,
       coalesce(sum(wall_s), 0) AS sum_s, coalesce(sum(pages), 0) AS sum_p,
       coalesce(sum(pages * pages), 0) AS sum_pp, coalesce(sum(pages * wall_s), 0) AS sum_ps,
       coalesce(sum(compute_seconds) FILTER (WHERE compute_seconds IS NOT NULL), 0) AS compute_s,
       coalesce(sum(wall_s) FILTER (WHERE compute_seconds IS NOT NULL), 0) AS compute_wall_s,
       (SELECT busy_s FROM busy) AS busy_s
FROM recent;

-- name: task_work_ahead_bounded
-- Work queued ahead of a new batch: an agent's enqueued, unheld tasks at its priority or above,
-- read up to %(bound)s rows from the fair-share index, and its tasks in flight.
-- Scans (no text layer) are counted apart, by their OCR work in standard pages where it was
-- measured (else their pages). Tasks in flight come with the seconds their documents would take,
-- at the rates given.
SELECT count(*) AS n, coalesce(sum(estimated_tokens), 0)::float8 AS tokens,
       coalesce(sum(greatest(coalesce(pages, 4), 1)) FILTER (WHERE NOT ocr), 0)::float8 AS text_pages,
       count(*) FILTER (WHERE ocr)::float8 AS ocr_n,
       coalesce(sum(coalesce(ocr_work, greatest(pages, 1))) FILTER (WHERE ocr), 0)::float8 AS ocr_pages,
       (SELECT count(*) FROM tasks p WHERE p.agent = %(agent)s AND p.status = 'processing') AS in_flight,
       (SELECT coalesce(sum(CASE WHEN p.scanned
                                 THEN %(ocr_base)s + %(ocr_per_page)s * coalesce(p.ocr_work, greatest(p.pages, 1))
                                 ELSE %(base)s + %(per_page)s * greatest(coalesce(p.pages, 4), 1) END), 0)::float8
          FROM tasks p WHERE p.agent = %(agent)s AND p.status = 'processing') AS in_flight_seconds
FROM (
    SELECT t.estimated_tokens, t.pages, t.scanned AS ocr, t.ocr_work FROM tasks t
    WHERE t.agent = %(agent)s AND t.status = 'enqueued' AND NOT t.held AND t.priority >= %(priority)s
      AND (%(batch_id)s::bigint IS NULL OR t.batch_id IS DISTINCT FROM %(batch_id)s::bigint)
    LIMIT %(bound)s
) ahead;

-- name: task_work_ahead_estimate
-- The planner's estimate of that work's row count, used past the bound.
EXPLAIN (FORMAT JSON)
SELECT 1 FROM tasks t
WHERE t.agent = %(agent)s AND t.status = 'enqueued' AND NOT t.held AND t.priority >= %(priority)s;

-- name: batch_insert
-- Records an upload and the forecast shown for it before it ran.
INSERT INTO batches (agent, customer, priority, submitted_by, forecast, held, created_at)
VALUES (%(agent)s, %(customer)s, %(priority)s, %(submitted_by)s, %(forecast)s, %(held)s, coalesce(%(now)s, now()))
RETURNING *;

-- name: batch_get
-- One upload with what it actually took so far: tasks by state, spend, and when its last task ended.
SELECT b.*,
       (SELECT count(*) FROM tasks t WHERE t.batch_id = b.id) AS tasks,
       (SELECT count(*) FROM tasks t WHERE t.batch_id = b.id
          AND t.status IN ('completed', 'failed', 'cancelled')) AS finished,
       (SELECT count(*) FROM tasks t WHERE t.batch_id = b.id AND t.held AND t.status = 'enqueued') AS held_tasks,
       (SELECT max(t.finished_at) FROM tasks t WHERE t.batch_id = b.id) AS last_finished_at,
       (SELECT coalesce(sum(a.input_tokens + a.output_tokens), 0) FROM task_attempts a
          JOIN tasks t ON t.id = a.task_id WHERE t.batch_id = b.id) AS actual_tokens,
       (SELECT coalesce(sum(a.llm_cost_usd), 0) FROM task_attempts a
          JOIN tasks t ON t.id = a.task_id WHERE t.batch_id = b.id) AS actual_llm_cost_usd,
       (SELECT coalesce(sum(a.compute_cost_usd), 0) FROM task_attempts a
          JOIN tasks t ON t.id = a.task_id WHERE t.batch_id = b.id) AS actual_compute_cost_usd
FROM batches b WHERE b.id = %(batch_id)s;

-- name: batch_release
-- Releases a held upload: its tasks become claimable now, and their timelines say who released them.
WITH released AS (
    UPDATE batches SET held = false, released_at = coalesce(%(now)s, now()), released_by = %(actor)s
    WHERE id = %(batch_id)s AND held
    RETURNING id
), tasks_released AS (
    -- The time held is the operator's, kept apart so the response time leaves it out.
    UPDATE tasks t SET held = false, run_after = coalesce(%(now)s, now()), updated_at = coalesce(%(now)s, now()),
                       held_seconds = greatest(extract(epoch FROM coalesce(%(now)s, now()) - t.created_at)::float8, 0)
    WHERE t.batch_id = %(batch_id)s AND t.held AND t.status = 'enqueued' AND EXISTS (SELECT 1 FROM released)
    RETURNING t.id, t.agent
), logged AS (
    -- No status changes, so the task trigger logs nothing: this event wakes the claimers instead.
    INSERT INTO task_events (task_id, agent, status, prev_status, actor)
    SELECT id, agent, 'enqueued', 'enqueued', %(actor)s FROM tasks_released ORDER BY id
    RETURNING id
)
SELECT (SELECT count(*) FROM released) AS batches, coalesce(array_agg(id), '{}') AS event_ids FROM logged;

-- name: task_events_notify
-- Publishes logged events to listeners (the same payload the task triggers send).
SELECT quire_notify_events(%(event_ids)s::bigint[]);

-- name: batch_delete_if_empty
-- An upload none of whose files became a task (all refused, or the request failed) leaves no row.
DELETE FROM batches b
WHERE b.id = %(batch_id)s AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.batch_id = b.id)
RETURNING b.id;

-- name: batch_set_forecast
-- The forecast of an upload once all its files are in.
UPDATE batches SET forecast = %(forecast)s WHERE id = %(batch_id)s;

-- name: agent_learned_tokens_list
-- The agent's learned token cost of each file by its pages (quire_learned_tokens' page line, read
-- once; NULL until it has learned).
SELECT quire_tokens_on_line(NULL, NULL, l.page_a, l.page_b, f.pages, f.bytes, NULL) AS tokens
FROM unnest(%(pages)s::integer[], %(bytes)s::bigint[]) WITH ORDINALITY AS f(pages, bytes, ord)
LEFT JOIN quire_token_line(%(agent)s, NULL) l ON true
ORDER BY f.ord;

-- name: agent_learned_seconds_list
-- An agent's recent completed attempts with the extractor it has now (or none recorded): wall
-- seconds, pages (for a scan, its OCR work in standard pages where measured), and whether the
-- document had no text layer (its pages went through OCR), for seconds per page learned apart for
-- scans and for text; and the CPU seconds the run's process and its children spent, where the
-- executor measured them (local runs).
SELECT extract(epoch FROM a.finished_at - a.started_at)::float8 AS wall_s, a.cpu_seconds AS cpu_s,
       a.started_at, a.finished_at,
       CASE WHEN t.scanned AND t.ocr_work IS NOT NULL THEN t.ocr_work::float8
            ELSE greatest(coalesce(t.pages, 1), 1)::float8 END AS pages,
       t.scanned AS ocr
FROM task_attempts a JOIN tasks t ON t.id = a.task_id
WHERE a.agent = %(agent)s AND a.status = 'completed' AND a.finished_at IS NOT NULL
  AND (a.extractor IS NULL OR a.extractor = %(extractor)s)
ORDER BY a.id DESC
LIMIT %(window)s;

-- name: batch_held_list
-- Every batch still held for review, newest first, with what it holds (held batches are few: an
-- operator reviews each).
SELECT b.id, b.agent, b.customer, b.priority, b.submitted_by, b.created_at, b.forecast,
       count(t.id) AS tasks,
       count(t.id) FILTER (WHERE t.held AND t.status = 'enqueued') AS held_tasks,
       coalesce(sum(greatest(t.pages, 0)), 0) AS pages
FROM batches b LEFT JOIN tasks t ON t.batch_id = b.id
WHERE b.held
GROUP BY b.id
ORDER BY b.id DESC
LIMIT %(limit)s;

-- name: batch_task_list
-- A batch's files as the upload page shows them after a reload: name, task, status, pages.
SELECT t.id, t.document_name, t.status::text AS status, t.pages, t.held, t.scanned, t.document_sha256
FROM tasks t WHERE t.batch_id = %(batch_id)s
ORDER BY t.id;

-- name: batch_discard
-- Discards a held batch: its held, queued documents are cancelled (the task trigger logs each, with
-- the actor set by the caller) and the batch no longer waits for a release.
WITH discarded AS (
    UPDATE batches SET held = false, discarded_at = coalesce(%(now)s, now()), discarded_by = %(actor)s
    WHERE id = %(batch_id)s AND held
    RETURNING id
), cancelled AS (
    UPDATE tasks t SET status = 'cancelled', held = false, cancelled_by = %(actor)s,
                       finished_at = coalesce(%(now)s, now()), updated_at = coalesce(%(now)s, now())
    WHERE t.batch_id = %(batch_id)s AND t.held AND t.status = 'enqueued' AND EXISTS (SELECT 1 FROM discarded)
    RETURNING t.id
)
SELECT (SELECT count(*) FROM discarded) AS batches, (SELECT count(*) FROM cancelled) AS tasks;
