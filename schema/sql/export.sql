-- name: task_cost_export_filtered
-- The per-task cost table the dashboard filters select, every row, for CSV and XLSX export:
-- AI tokens and compute apart, unpriced tokens and compute whose billing is not final flagged.
SELECT t.id AS task_id, t.created_at, t.finished_at, t.status::text AS status, t.agent, t.customer,
       t.document_name, t.pages, t.attempt_count AS attempts,
       s.input_tokens, s.output_tokens, s.llm_cost_usd, coalesce(s.llm_unpriced, false) AS llm_unpriced,
       s.compute_cost_usd, s.dbus, coalesce(s.compute_pending, false) AS compute_pending
FROM tasks t
LEFT JOIN LATERAL (
    SELECT sum(a.input_tokens)::bigint AS input_tokens, sum(a.output_tokens)::bigint AS output_tokens,
           sum(a.llm_cost_usd) AS llm_cost_usd, bool_or(a.llm_unpriced) AS llm_unpriced,
           sum(a.compute_cost_usd) AS compute_cost_usd, sum(a.dbus) AS dbus,
           bool_or(a.compute_state IN ('pending', 'billed')) AS compute_pending
    FROM task_attempts a WHERE a.task_id = t.id
) s ON true
WHERE {task_filter}
ORDER BY t.id;
