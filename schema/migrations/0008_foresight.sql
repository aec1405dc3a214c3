-- Operator foresight and fairness: fair share across customers in the claim, monthly LLM budgets
-- per customer, batches with their forecast, held tasks, and the claim order queue positions read.

-- A customer's optional monthly LLM budget: quire.toml seeds it, an operator may change it.
CREATE TABLE customers (
    name                    text PRIMARY KEY CHECK (name <> ''),
    monthly_llm_budget_usd  numeric(14, 2) CHECK (monthly_llm_budget_usd >= 0),  -- NULL: no budget
    config_budget_usd       numeric(14, 2),  -- the quire.toml value last applied (NULL: none)
    updated_by              text,
    updated_at              timestamptz NOT NULL DEFAULT now()
);

-- LLM spend per customer and calendar month (UTC, by attempt start), folded from attempt writes by
-- the statement triggers below, so the claim's budget check reads one row per budgeted customer.
CREATE TABLE customer_month_spend (
    customer      text NOT NULL,
    month         date NOT NULL,
    llm_cost_usd  numeric(16, 6) NOT NULL DEFAULT 0,
    PRIMARY KEY (customer, month)
);

INSERT INTO customer_month_spend (customer, month, llm_cost_usd)
SELECT t.customer, date_trunc('month', a.started_at AT TIME ZONE 'UTC')::date, sum(a.llm_cost_usd)
FROM task_attempts a JOIN tasks t ON t.id = a.task_id
WHERE t.customer IS NOT NULL AND a.llm_cost_usd IS NOT NULL
GROUP BY 1, 2;

CREATE FUNCTION quire_attempts_spend_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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

CREATE FUNCTION quire_attempts_spend_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO customer_month_spend AS s (customer, month, llm_cost_usd)
    SELECT t.customer, date_trunc('month', n.started_at AT TIME ZONE 'UTC')::date, sum(n.llm_cost_usd)
    FROM new_rows n JOIN tasks t ON t.id = n.task_id
    WHERE t.customer IS NOT NULL AND n.llm_cost_usd IS NOT NULL
    GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (customer, month) DO UPDATE SET llm_cost_usd = s.llm_cost_usd + excluded.llm_cost_usd;
    RETURN NULL;
END $$;

CREATE TRIGGER task_attempts_spend_updated AFTER UPDATE ON task_attempts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_attempts_spend_updated();

CREATE TRIGGER task_attempts_spend_inserted AFTER INSERT ON task_attempts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_attempts_spend_inserted();

-- Customers whose spend this month has reached their budget: their tasks wait, enqueued.
CREATE FUNCTION quire_customers_over_budget(at_time timestamptz) RETURNS TABLE (customer text)
LANGUAGE sql STABLE AS $$
    SELECT c.name
    FROM customers c
    JOIN customer_month_spend s
      ON s.customer = c.name AND s.month = date_trunc('month', at_time AT TIME ZONE 'UTC')::date
    WHERE c.monthly_llm_budget_usd IS NOT NULL AND s.llm_cost_usd >= c.monthly_llm_budget_usd
$$;

-- One upload: the forecast shown before it ran, kept to compare with what it actually cost.
CREATE TABLE batches (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent         text NOT NULL REFERENCES agents (name),
    customer      text,
    priority      smallint NOT NULL CHECK (priority BETWEEN 0 AND 9),
    submitted_by  text,
    forecast      jsonb NOT NULL,
    held          boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    released_at   timestamptz,
    released_by   text
);

-- A held task is stored and enqueued but no claim takes it until an operator releases it.
ALTER TABLE tasks ADD COLUMN held boolean NOT NULL DEFAULT false;
ALTER TABLE tasks ADD COLUMN batch_id bigint REFERENCES batches (id);
CREATE INDEX tasks_batch_idx ON tasks (batch_id) WHERE batch_id IS NOT NULL;

-- Fair share walks this index: distinct (priority, customer) groups by skip scan, then each
-- group's head in FIFO order. Held tasks are not in it.
CREATE INDEX tasks_fair_claim_idx ON tasks (agent, priority DESC, (coalesce(customer, '')), created_at, id)
    WHERE status = 'enqueued' AND NOT held;

-- How much each customer of an agent was served lately: its tasks in flight and among the agent's
-- last 64 attempts. Fair share ranks a customer's next task after that much service, so customers
-- take turns whether tasks overlap (a cap) or run one at a time. Bounded: 64 attempts plus in flight.
CREATE FUNCTION quire_customer_served(p_agent text) RETURNS TABLE (ckey text, served bigint)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(t.customer, ''), count(*)
    FROM (
        (SELECT a.task_id FROM task_attempts a WHERE a.agent = p_agent ORDER BY a.started_at DESC LIMIT 64)
        UNION
        SELECT p.id FROM tasks p WHERE p.agent = p_agent AND p.status = 'processing'
    ) s
    JOIN tasks t ON t.id = s.task_id
    GROUP BY 1
$$;

-- The head of an agent's claimable backlog in fair-share order: within a priority, customers take
-- turns (a customer's k-th queued task ranks k plus its recent service, quire_customer_served), FIFO
-- within each customer. Bounded: at most max_groups (priority, customer) groups, per_group tasks
-- each. Customers over budget are left out. Callers order by (priority DESC, fair_rank,
-- created_at, id) and lock what they take.
CREATE FUNCTION quire_claim_candidates(p_agent text, p_now timestamptz, per_group integer,
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
LEFT JOIN quire_customer_served(p_agent) f ON f.ckey = g.ckey
-- The budget filter: a customer over its monthly LLM budget is not claimed from.
WHERE g.ckey NOT IN (SELECT b.customer FROM quire_customers_over_budget(p_now) b)
$$;
