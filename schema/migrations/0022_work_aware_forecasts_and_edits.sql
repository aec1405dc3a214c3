-- Forecasts that know the work, and edit-and-retry.

-- A document without a text layer (a scan): its pages go through OCR, which takes far longer a
-- page than text. Forecasts and ETAs learn and use its seconds per page apart.
ALTER TABLE tasks ADD COLUMN scanned boolean NOT NULL DEFAULT false;

-- The extractor an attempt ran with (the agent's, or the task's override): seconds per page are
-- learned per agent and extractor, so a switch to another extractor starts from what it ran.
ALTER TABLE task_attempts ADD COLUMN extractor text;

-- Edit and retry: what a task's next runs use instead of its agent's settings (`extractor`,
-- `model`), and every edit with who made it and when ({at, by, changes: {field: [from, to]}}).
ALTER TABLE tasks ADD COLUMN run_overrides jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE tasks ADD COLUMN edits jsonb NOT NULL DEFAULT '[]'::jsonb;

-- A held batch an operator discarded: its queued documents were cancelled, and it no longer waits
-- for a release. Held batches are listed wherever batches are (the partial index keeps that cheap).
ALTER TABLE batches ADD COLUMN discarded_at timestamptz;
ALTER TABLE batches ADD COLUMN discarded_by text;
CREATE INDEX batches_held_idx ON batches (id) WHERE held;

-- A customer's guaranteed share and burst ceiling, beside the fair share: of each agent's running
-- tasks, at least guaranteed_tasks are its own whenever it has work waiting (its next tasks rank
-- first within their priority), and never more than max_tasks. NULL: none.
ALTER TABLE customers ADD COLUMN guaranteed_tasks integer CHECK (guaranteed_tasks BETWEEN 1 AND 100000);
ALTER TABLE customers ADD COLUMN max_tasks integer CHECK (max_tasks BETWEEN 1 AND 100000);
ALTER TABLE customers ADD COLUMN config_shares jsonb;  -- the quire.toml values last applied
ALTER TABLE customers ADD CONSTRAINT customers_guarantee_within_ceiling
    CHECK (guaranteed_tasks IS NULL OR max_tasks IS NULL OR guaranteed_tasks <= max_tasks);

-- The customers with a share or a ceiling, and how many of their tasks an agent runs now. While
-- any customer has one, the claims of an agent take turns (a transaction lock per agent), and
-- each reads the running tasks with a fresh snapshot, after the claim before it committed: two
-- claims together can never pass a ceiling. Without shares it returns at once and claims run in
-- parallel as before.
CREATE FUNCTION quire_customer_shares(p_agent text)
RETURNS TABLE (ckey text, running bigint, guaranteed_tasks integer, max_tasks integer)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM customers c WHERE c.guaranteed_tasks IS NOT NULL OR c.max_tasks IS NOT NULL) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('quire.customer_shares.' || p_agent, 0));
    RETURN QUERY
        SELECT c.name,
               (SELECT count(*) FROM tasks p
                 WHERE p.agent = p_agent AND p.status = 'processing' AND p.customer = c.name),
               c.guaranteed_tasks, c.max_tasks
        FROM customers c
        WHERE c.guaranteed_tasks IS NOT NULL OR c.max_tasks IS NOT NULL;
END $$;

-- As in migration 0010, with shares: a customer's tasks past its ceiling (less those running) are
-- not candidates, and its tasks within its guarantee (less those running) rank before every other
-- customer's at their priority.
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
), shares AS MATERIALIZED (
    SELECT * FROM quire_customer_shares(p_agent)
)
SELECT r.id, r.priority, r.customer, r.created_at,
       CASE WHEN r.ck <= coalesce(r.guaranteed_tasks - r.running, 0)
            THEN r.ck - 1000000000  -- within the guarantee: ahead of every fair-share rank
            ELSE r.fair_rank END
FROM (
    SELECT c.id, g.priority, c.customer, c.created_at, coalesce(f.served, 0) + c.k AS fair_rank,
           s.guaranteed_tasks, s.max_tasks, s.running,
           -- A customer's candidates across its priorities, best first: the ceiling counts them all.
           row_number() OVER (PARTITION BY g.ckey ORDER BY g.priority DESC, c.created_at, c.id) AS ck
    FROM grp g
    CROSS JOIN LATERAL (
        SELECT t.id, t.customer, t.created_at, row_number() OVER (ORDER BY t.created_at, t.id) AS k
        FROM tasks t
        WHERE t.agent = p_agent AND t.status = 'enqueued' AND NOT t.held
          AND t.priority = g.priority AND coalesce(t.customer, '') = g.ckey AND t.run_after <= p_now
        ORDER BY t.created_at, t.id
        LIMIT per_group
    ) c
    LEFT JOIN served f ON f.ckey = g.ckey
    LEFT JOIN shares s ON s.ckey = g.ckey
    -- The budget filter: a customer over its monthly LLM budget is not claimed from.
    WHERE g.ckey NOT IN (SELECT b.customer FROM quire_customers_over_budget(p_now) b)
) r
-- The ceiling: no more of its tasks than it may still start.
WHERE r.max_tasks IS NULL OR r.ck <= r.max_tasks - r.running
$$;
