-- name: billing_usage_for_runs
-- Databricks SQL for the statement execution API, not Postgres. Per job run of :run_ids
-- (comma-separated) in workspace :workspace_id (system.billing.usage is account-wide): its DBUs
-- and their cost at the effective list price in force when each was used (promotions included),
-- reading usage from the date :since on only. Every record counts, RETRACTION and RESTATEMENT
-- corrections included: a retraction's negative quantity nets out what it corrects. Other usage
-- units are left out; DBUs with no list price are kept and counted apart (unpriced_dbus), never
-- priced at $0. `records` lets the reconciler see a run's figures change.
SELECT u.usage_metadata.job_run_id AS job_run_id,
       sum(u.usage_quantity) AS dbus,
       sum(u.usage_quantity * CAST(lp.pricing.effective_list.default AS DOUBLE)) AS cost_usd,
       sum(CASE WHEN lp.pricing.effective_list.default IS NULL THEN u.usage_quantity ELSE 0 END) AS unpriced_dbus,
       count(*) AS records
FROM system.billing.usage u
LEFT JOIN system.billing.list_prices lp
  ON lp.sku_name = u.sku_name AND lp.cloud = u.cloud AND lp.usage_unit = u.usage_unit
 AND lp.currency_code = 'USD'
 AND u.usage_start_time >= lp.price_start_time
 AND (lp.price_end_time IS NULL OR u.usage_start_time < lp.price_end_time)
WHERE u.workspace_id = :workspace_id
  AND u.usage_date >= to_date(:since)
  AND u.usage_unit = 'DBU'
  AND array_contains(split(:run_ids, ','), u.usage_metadata.job_run_id)
GROUP BY u.usage_metadata.job_run_id;

-- name: attempt_list_compute_open_batch
-- Job-run attempts whose compute figures are not final yet (none billed, or billed but still
-- open to late and corrected records), after a cursor, with when each run started.
SELECT a.id, a.job_run_id, a.started_at
FROM task_attempts a
WHERE a.compute_state IN ('pending', 'billed') AND a.job_run_id IS NOT NULL AND a.id > %(after_id)s
ORDER BY a.id
LIMIT %(batch)s;

-- name: attempt_record_billing_batch
-- What the billing tables say of a batch of job runs, written to their attempts: figures that
-- changed (or came for the first time) are rewritten and the attempt is 'billed' (provisional);
-- figures of an ended run unchanged for :final_seconds after its end and after their last change
-- become 'final'; a run with no record :unbilled_seconds after it ended becomes 'unbilled'. Only
-- attempts still open (pending, billed) are touched; returns what changed.
WITH seen AS (
    SELECT r.job_run_id, r.dbus, round(r.cost_usd, 6) AS cost_usd, r.unpriced_dbus <> 0 AS unpriced,
           r.records
    FROM jsonb_to_recordset(%(usage)s::jsonb) AS r(job_run_id text, dbus numeric, cost_usd numeric,
                                                    unpriced_dbus numeric, records integer)
), next AS (
    SELECT a.id, s.dbus, s.cost_usd, s.unpriced, s.records,
           s.job_run_id IS NOT NULL AND (a.compute_state = 'pending'
               OR a.dbus IS DISTINCT FROM s.dbus OR a.compute_cost_usd IS DISTINCT FROM s.cost_usd
               OR a.compute_unpriced IS DISTINCT FROM s.unpriced
               OR a.billing_records IS DISTINCT FROM s.records) AS changed,
           greatest(a.finished_at, a.billing_changed_at) AS quiet_since, a.finished_at
    FROM task_attempts a LEFT JOIN seen s ON s.job_run_id = a.job_run_id
    WHERE a.id = ANY(%(attempt_ids)s::bigint[]) AND a.compute_state IN ('pending', 'billed')
    FOR UPDATE OF a
)
UPDATE task_attempts a SET
    dbus = CASE WHEN n.changed THEN n.dbus ELSE a.dbus END,
    compute_cost_usd = CASE WHEN n.changed THEN n.cost_usd ELSE a.compute_cost_usd END,
    compute_unpriced = CASE WHEN n.changed THEN n.unpriced ELSE a.compute_unpriced END,
    billing_records = CASE WHEN n.changed THEN n.records ELSE a.billing_records END,
    billing_changed_at = CASE WHEN n.changed THEN coalesce(%(now)s, now()) ELSE a.billing_changed_at END,
    compute_state = CASE
        WHEN n.changed THEN 'billed'
        WHEN a.compute_state = 'billed' AND n.finished_at IS NOT NULL
             AND n.quiet_since <= coalesce(%(now)s, now()) - make_interval(secs => %(final_seconds)s)
            THEN 'final'
        WHEN a.compute_state = 'pending'
             AND n.finished_at <= coalesce(%(now)s, now()) - make_interval(secs => %(unbilled_seconds)s)
            THEN 'unbilled'
        ELSE a.compute_state END
FROM next n
WHERE a.id = n.id
  AND (n.changed
       OR (a.compute_state = 'billed' AND n.finished_at IS NOT NULL
           AND n.quiet_since <= coalesce(%(now)s, now()) - make_interval(secs => %(final_seconds)s))
       OR (a.compute_state = 'pending'
           AND n.finished_at <= coalesce(%(now)s, now()) - make_interval(secs => %(unbilled_seconds)s)))
RETURNING a.id, a.job_run_id, a.compute_state, a.dbus, a.compute_cost_usd, a.compute_unpriced;
