-- name: billing_usage_for_runs_account_prices
-- Databricks SQL for the statement execution API, not Postgres: DBUs and cost of the job runs in
-- :run_ids (comma-separated), each usage row priced at the account's price in effect at usage time
-- where the account has one (system.billing.account_prices), else at the list price then.
SELECT u.usage_metadata.job_run_id AS job_run_id,
       sum(u.usage_quantity) AS dbus,
       sum(u.usage_quantity * CAST(coalesce(ap.pricing.default, lp.pricing.default) AS DOUBLE)) AS cost_usd
FROM system.billing.usage u
JOIN system.billing.list_prices lp
  ON lp.sku_name = u.sku_name AND lp.cloud = u.cloud AND lp.usage_unit = u.usage_unit
 AND lp.currency_code = 'USD'
 AND u.usage_start_time >= lp.price_start_time
 AND (lp.price_end_time IS NULL OR u.usage_start_time < lp.price_end_time)
LEFT JOIN system.billing.account_prices ap
  ON ap.sku_name = u.sku_name AND ap.usage_unit = u.usage_unit AND ap.currency_code = 'USD'
 AND u.usage_start_time >= ap.price_start_time
 AND (ap.price_end_time IS NULL OR u.usage_start_time < ap.price_end_time)
WHERE array_contains(split(:run_ids, ','), u.usage_metadata.job_run_id)
GROUP BY 1;

-- name: billing_usage_for_runs_list_prices
-- Databricks SQL: the same at list prices only, for workspaces without an account price table.
SELECT u.usage_metadata.job_run_id AS job_run_id,
       sum(u.usage_quantity) AS dbus,
       sum(u.usage_quantity * CAST(lp.pricing.default AS DOUBLE)) AS cost_usd
FROM system.billing.usage u
JOIN system.billing.list_prices lp
  ON lp.sku_name = u.sku_name AND lp.cloud = u.cloud AND lp.usage_unit = u.usage_unit
 AND lp.currency_code = 'USD'
 AND u.usage_start_time >= lp.price_start_time
 AND (lp.price_end_time IS NULL OR u.usage_start_time < lp.price_end_time)
WHERE array_contains(split(:run_ids, ','), u.usage_metadata.job_run_id)
GROUP BY 1;

-- name: attempt_list_compute_pending_batch
-- Ended job-run attempts whose compute the billing tables have not priced yet, after a cursor.
SELECT a.id, a.job_run_id
FROM task_attempts a
WHERE a.compute_state = 'pending' AND a.job_run_id IS NOT NULL AND a.id > %(after_id)s
ORDER BY a.id
LIMIT %(batch)s;

-- name: attempt_record_billing_if_pending
-- DBUs and cost of a job run from the billing tables, written once: only while still pending.
UPDATE task_attempts SET dbus = %(dbus)s, compute_cost_usd = %(compute_cost_usd)s, compute_state = 'billed'
WHERE id = %(attempt_id)s AND compute_state = 'pending'
RETURNING id;
