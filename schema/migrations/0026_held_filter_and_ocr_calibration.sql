-- "Held" as a dashboard filter, and OCR's seconds per page measured by each worker at start-up.

-- The task table reads this view: it carries whether a task is held for review, so the "held"
-- status of the filter (queued and held) selects from it as from the tasks themselves.
CREATE OR REPLACE VIEW task_list_rows AS
SELECT t.id, t.agent, t.customer, t.priority, t.status, t.document_name, t.document_sha256, t.pages,
       t.confidence, t.error, t.submitted_by, t.attempt_count, t.parent_id, t.created_at, t.finished_at,
       extract(epoch FROM t.finished_at - t.created_at) - t.held_seconds::numeric AS latency_s,
       s.input_tokens, s.output_tokens, s.llm_cost_usd, s.compute_cost_usd,
       coalesce(s.input_tokens, 0) + coalesce(s.output_tokens, 0) AS tokens,
       t.held_seconds, t.held
FROM tasks t
LEFT JOIN LATERAL (
    SELECT sum(a.input_tokens)::bigint AS input_tokens, sum(a.output_tokens)::bigint AS output_tokens,
           sum(a.llm_cost_usd) AS llm_cost_usd, sum(a.compute_cost_usd) AS compute_cost_usd
    FROM task_attempts a WHERE a.task_id = t.id
) s ON true;

-- A forecast made before an agent has read any scan needs a prior for OCR that fits the machine
-- the work runs on: each worker host times one page through the same OCR at start-up.
CREATE TABLE ocr_calibrations (
    host text PRIMARY KEY,
    seconds_per_page double precision NOT NULL CHECK (seconds_per_page > 0),
    dpi double precision NOT NULL CHECK (dpi > 0),
    measured_at timestamptz NOT NULL DEFAULT now()
);
