-- name: customer_budget_set
-- An operator sets (or clears, with NULL) a customer's monthly LLM budget.
INSERT INTO customers (name, monthly_llm_budget_usd, updated_by, updated_at)
VALUES (%(customer)s, %(budget)s, %(actor)s, coalesce(%(now)s, now()))
ON CONFLICT (name) DO UPDATE SET
    monthly_llm_budget_usd = excluded.monthly_llm_budget_usd,
    updated_by = excluded.updated_by,
    updated_at = excluded.updated_at
RETURNING *;

-- name: customer_budget_apply_config
-- quire.toml's budget for a customer, applied only when it differs from the value last applied,
-- so an operator's later change holds until the file itself changes.
INSERT INTO customers (name, monthly_llm_budget_usd, config_budget_usd, updated_by)
VALUES (%(customer)s, %(budget)s, %(budget)s, 'quire.toml')
ON CONFLICT (name) DO UPDATE SET
    monthly_llm_budget_usd = excluded.monthly_llm_budget_usd,
    config_budget_usd = excluded.config_budget_usd,
    updated_by = 'quire.toml',
    updated_at = now()
WHERE customers.config_budget_usd IS DISTINCT FROM excluded.config_budget_usd
RETURNING *;

-- name: customer_budget_list
-- Budgeted customers and every customer with spend this month: spend against budget.
SELECT coalesce(c.name, s.customer) AS customer, c.monthly_llm_budget_usd, c.updated_by, c.updated_at,
       coalesce(s.llm_cost_usd, 0) AS month_llm_cost_usd,
       date_trunc('month', coalesce(%(now)s, now()) AT TIME ZONE 'UTC')::date AS month
FROM customers c
FULL JOIN (SELECT customer, llm_cost_usd FROM customer_month_spend
           WHERE month = date_trunc('month', coalesce(%(now)s, now()) AT TIME ZONE 'UTC')::date) s
  ON s.customer = c.name
WHERE c.monthly_llm_budget_usd IS NOT NULL OR s.customer IS NOT NULL
ORDER BY 1
LIMIT 200;

-- name: customer_over_budget_list
-- Customers whose tasks wait because this month's LLM spend reached their budget.
SELECT customer FROM quire_customers_over_budget(coalesce(%(now)s, now()));

-- name: customer_shares_apply_config
-- quire.toml's guaranteed share and burst ceiling for a customer (tasks of each agent at once),
-- written when they differ from the values last applied.
INSERT INTO customers (name, guaranteed_tasks, max_tasks, config_shares, updated_by)
VALUES (%(customer)s, %(guaranteed)s, %(ceiling)s, %(shares)s, 'quire.toml')
ON CONFLICT (name) DO UPDATE SET
    guaranteed_tasks = excluded.guaranteed_tasks,
    max_tasks = excluded.max_tasks,
    config_shares = excluded.config_shares,
    updated_by = 'quire.toml',
    updated_at = now()
WHERE customers.config_shares IS DISTINCT FROM excluded.config_shares
RETURNING *;
