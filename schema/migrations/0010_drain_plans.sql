-- Cheaper statements for a draining worker.
--
-- The claim's fair-share head: a customer's recent service (quire_customer_served) orders the
-- customers of an agent against each other, so it is read only when the head holds more than
-- one (priority, customer) group. A backlog of one customer, the common bulk case, skips it.
CREATE OR REPLACE FUNCTION quire_claim_candidates(p_agent text, p_now timestamptz, per_group integer,
                                                  max_groups integer DEFAULT 256)
RETURNS TABLE (id bigint, priority smallint, customer text, created_at timestamptz, fair_rank bigint)
LANGUAGE sql STABLE AS $$
WITH RECURSIVE grp AS (
    (SELECT t.priority, coalesce(t.customer, '') AS ckey, 1 AS n
     FROM tasks t
     WHERE t.agent = p_agent AND t.status = 'enqueued' AND NOT t.held
     ORDER BY t.priority DESC, coalesce(t.customer, '')
     LIMIT 1)
    UNION ALL
    SELECT nxt.priority, nxt.ckey, g.n + 1
    FROM grp g CROSS JOIN LATERAL (
        (SELECT t.priority, coalesce(t.customer, '') AS ckey
         FROM tasks t
         WHERE t.agent = p_agent AND t.status = 'enqueued' AND NOT t.held
           AND t.priority = g.priority AND coalesce(t.customer, '') > g.ckey
         ORDER BY t.priority DESC, coalesce(t.customer, '')
         LIMIT 1)
        UNION ALL
        (SELECT t.priority, coalesce(t.customer, '') AS ckey
         FROM tasks t
         WHERE t.agent = p_agent AND t.status = 'enqueued' AND NOT t.held AND t.priority < g.priority
         ORDER BY t.priority DESC, coalesce(t.customer, '')
         LIMIT 1)
        LIMIT 1
    ) nxt
    WHERE g.n < max_groups
), served AS MATERIALIZED (
    SELECT f.ckey, f.served FROM quire_customer_served(p_agent) f
    WHERE EXISTS (SELECT 1 FROM grp OFFSET 1)
)
SELECT c.id, g.priority, c.customer, c.created_at,
       coalesce(f.served, 0) + row_number() OVER (PARTITION BY g.priority, g.ckey ORDER BY c.created_at, c.id)
FROM grp g
CROSS JOIN LATERAL (
    SELECT t.id, t.customer, t.created_at
    FROM tasks t
    WHERE t.agent = p_agent AND t.status = 'enqueued' AND NOT t.held
      AND t.priority = g.priority AND coalesce(t.customer, '') = g.ckey AND t.run_after <= p_now
    ORDER BY t.created_at, t.id
    LIMIT per_group
) c
LEFT JOIN served f ON f.ckey = g.ckey
-- The budget filter: a customer over its monthly LLM budget is not claimed from.
WHERE g.ckey NOT IN (SELECT b.customer FROM quire_customers_over_budget(p_now) b)
$$;

-- Customer spend is folded only from statements that changed an attempt's LLM cost; the claim and
-- the settlement of runs without spend return at once instead of joining every task.
CREATE OR REPLACE FUNCTION quire_attempts_spend_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- No cost (or a zero one) before or after in any row: no spend changed, and the two row sets
    -- need no joining.
    IF NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.llm_cost_usd <> 0)
       AND NOT EXISTS (SELECT 1 FROM old_rows o WHERE o.llm_cost_usd <> 0) THEN
        RETURN NULL;
    END IF;
    -- Ordered by key, so two statements touching the same customers lock their rows in one order.
    INSERT INTO customer_month_spend AS s (customer, month, llm_cost_usd)
    SELECT t.customer, date_trunc('month', n.started_at AT TIME ZONE 'UTC')::date,
           sum(coalesce(n.llm_cost_usd, 0) - coalesce(o.llm_cost_usd, 0))
    FROM new_rows n JOIN old_rows o ON o.id = n.id JOIN tasks t ON t.id = n.task_id
    WHERE t.customer IS NOT NULL AND n.llm_cost_usd IS DISTINCT FROM o.llm_cost_usd
    GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (customer, month) DO UPDATE SET llm_cost_usd = s.llm_cost_usd + excluded.llm_cost_usd;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION quire_attempts_spend_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.llm_cost_usd <> 0) THEN
        RETURN NULL;
    END IF;
    INSERT INTO customer_month_spend AS s (customer, month, llm_cost_usd)
    SELECT t.customer, date_trunc('month', n.started_at AT TIME ZONE 'UTC')::date, sum(n.llm_cost_usd)
    FROM new_rows n JOIN tasks t ON t.id = n.task_id
    WHERE t.customer IS NOT NULL AND n.llm_cost_usd IS NOT NULL
    GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (customer, month) DO UPDATE SET llm_cost_usd = s.llm_cost_usd + excluded.llm_cost_usd;
    RETURN NULL;
END $$;

-- An attempt's task is found through the unique (task_id, attempt_no) index; a second index on
-- task_id alone only cost every claim and settlement one more index entry per attempt.
DROP INDEX task_attempts_task_idx;

-- Every trigger function says how it joins, whatever the statement that fires it set (settlement
-- turns nested loops off for its batch statement). Those that look rows up in the big tables do
-- so by index, in nested loops; those that only pair a statement's old and new rows by id do it by
-- hash (the row sets have no statistics, and a nested loop over them is quadratic in the batch).
ALTER FUNCTION quire_tasks_inserted() SET enable_nestloop = on;
ALTER FUNCTION quire_tasks_learn_tokens() SET enable_nestloop = on;
ALTER FUNCTION quire_attempts_spend_inserted() SET enable_nestloop = on;
ALTER FUNCTION quire_attempts_spend_updated() SET enable_nestloop = on;
ALTER FUNCTION quire_agents_written() SET enable_nestloop = on;
ALTER FUNCTION quire_tasks_updated() SET enable_nestloop = off;
ALTER FUNCTION quire_rollup_mark_tasks() SET enable_nestloop = off;
ALTER FUNCTION quire_rollup_mark_attempts() SET enable_nestloop = off;
