-- Rollups of the dashboard's figures by time bucket x agent x customer x status, kept exact
-- without a hot counter row: statement triggers append the ids of changed tasks to
-- rollup_dirty (append-only, no index), and a fold (quire_rollup_fold) moves each marked task's
-- contribution from what was last folded (rollup_task_state) to what it is now. A reader adds the
-- unfolded marks' corrections (now minus last folded) to the folded rows, so figures are exact.

-- Log-scale histogram bin: 0 below `base`, then one bin per factor 1.25 (about +-12% per bin).
CREATE FUNCTION quire_log_bin(x double precision, base double precision) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN x IS NULL THEN NULL
                WHEN x < base THEN 0
                ELSE least(1 + floor(ln(x / base) / ln(1.25)), 150) END::smallint
$$;

-- What one task contributes to the rollups now: its key, its attempts' spend, and its bins.
CREATE VIEW task_rollup_contrib AS
SELECT t.id AS task_id, t.created_at, t.finished_at, t.agent, t.customer, t.status,
       (s.attempts > 0)::int AS attempted, s.attempts, (s.usage_attempts > 0)::int AS with_usage,
       coalesce(s.input_tokens, 0) AS input_tokens, coalesce(s.output_tokens, 0) AS output_tokens,
       coalesce(s.llm_cost_usd, 0) AS llm_cost_usd, coalesce(s.compute_cost_usd, 0) AS compute_cost_usd,
       s.unpriced, s.compute_pending,
       (t.status = 'completed' AND t.confidence IS NOT NULL)::int AS confidence_n,
       CASE WHEN t.status = 'completed' AND t.confidence IS NOT NULL
            THEN t.confidence::numeric ELSE 0 END AS confidence_sum,
       CASE WHEN t.status = 'completed'
            THEN quire_log_bin(extract(epoch FROM t.finished_at - t.created_at)::float8, 0.1) END AS latency_bin,
       -- real holds 0.9 as 0.8999...: rounding first puts it in the bin a person expects.
       CASE WHEN t.status = 'completed' AND t.confidence IS NOT NULL
            THEN least(width_bucket(round(t.confidence::numeric, 4), 0, 1, 10), 10)::smallint END AS confidence_bin,
       quire_log_bin(s.llm_cost_usd::float8, 1e-6) AS llm_bin,
       quire_log_bin(s.compute_cost_usd::float8, 1e-6) AS compute_bin,
       CASE WHEN s.llm_cost_usd IS NOT NULL OR s.compute_cost_usd IS NOT NULL
            THEN quire_log_bin((coalesce(s.llm_cost_usd, 0) + coalesce(s.compute_cost_usd, 0))::float8, 1e-6)
       END AS spend_bin
FROM tasks t
CROSS JOIN LATERAL (
    SELECT count(*)::int AS attempts,
           count(*) FILTER (WHERE a.usage_recorded_at IS NOT NULL)::int AS usage_attempts,
           sum(a.input_tokens)::bigint AS input_tokens, sum(a.output_tokens)::bigint AS output_tokens,
           sum(a.llm_cost_usd) AS llm_cost_usd, sum(a.compute_cost_usd) AS compute_cost_usd,
           -- usage without a price is "unpriced", never $0
           count(*) FILTER (WHERE coalesce(a.input_tokens, 0) + coalesce(a.output_tokens, 0) > 0
                              AND a.llm_cost_usd IS NULL)::int AS unpriced,
           -- a finished job run whose billing has not been reconciled yet
           count(*) FILTER (WHERE a.finished_at IS NOT NULL AND a.job_run_id IS NOT NULL
                              AND a.compute_cost_usd IS NULL)::int AS compute_pending
    FROM task_attempts a WHERE a.task_id = t.id
) s;

-- Each task's contribution as last folded (same columns as the view).
CREATE TABLE rollup_task_state AS SELECT * FROM task_rollup_contrib WITH NO DATA;
ALTER TABLE rollup_task_state ADD PRIMARY KEY (task_id);

-- Tasks changed since the last fold; written by the triggers below, emptied by the fold.
CREATE TABLE rollup_dirty (task_id bigint NOT NULL);

-- Grain 'h' (hour; all customers only), 'd' (day) and 'm' (month) of created_at in UTC.
-- all_customers rows sum every customer (customer is NULL there); the others are per customer.
-- `finished` is finished_at at the same grain (h and d only), for the throughput chart.
CREATE TABLE task_rollups (
    all_customers    boolean NOT NULL,
    grain            "char" NOT NULL CHECK (grain IN ('h', 'd', 'm')),
    bucket           timestamptz NOT NULL,
    agent            text NOT NULL,
    customer         text,
    status           task_status NOT NULL,
    finished         timestamptz,
    tasks            bigint NOT NULL,
    attempted        bigint NOT NULL,
    attempts         bigint NOT NULL,
    with_usage       bigint NOT NULL,
    input_tokens     numeric NOT NULL,
    output_tokens    numeric NOT NULL,
    llm_cost_usd     numeric NOT NULL,
    compute_cost_usd numeric NOT NULL,
    unpriced         bigint NOT NULL,
    compute_pending  bigint NOT NULL,
    confidence_n     bigint NOT NULL,
    confidence_sum   numeric NOT NULL
);
CREATE UNIQUE INDEX task_rollups_key ON task_rollups
    (all_customers, grain, bucket, agent, customer, status, finished) NULLS NOT DISTINCT;

-- Histograms: metric 'l' latency, 'c' confidence, 'a' LLM spend, 'm' compute spend, 's' both.
-- Grains 'd' and 'm' for all customers, 'm' per customer.
CREATE TABLE task_rollup_bins (
    all_customers boolean NOT NULL,
    grain         "char" NOT NULL CHECK (grain IN ('d', 'm')),
    bucket        timestamptz NOT NULL,
    agent         text NOT NULL,
    customer      text,
    status        task_status NOT NULL,
    metric        "char" NOT NULL,
    bin           smallint NOT NULL,
    n             bigint NOT NULL
);
CREATE UNIQUE INDEX task_rollup_bins_key ON task_rollup_bins
    (all_customers, grain, bucket, agent, customer, status, metric, bin) NULLS NOT DISTINCT;

-- Raw reads of one customer's partial buckets and of the first submission walk this index.
CREATE INDEX tasks_customer_created_idx ON tasks (customer, created_at);

-- Statement-level: one INSERT of the changed ids per statement; heartbeats and lease writes
-- change nothing the rollups hold and mark nothing.
CREATE FUNCTION quire_rollup_mark_tasks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO rollup_dirty (task_id) SELECT n.id FROM new_rows n;
    ELSE
        INSERT INTO rollup_dirty (task_id)
        SELECT n.id FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE (n.status, n.finished_at, n.confidence, n.agent, n.customer, n.created_at)
              IS DISTINCT FROM (o.status, o.finished_at, o.confidence, o.agent, o.customer, o.created_at);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION quire_rollup_mark_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO rollup_dirty (task_id) SELECT DISTINCT n.task_id FROM new_rows n;
    ELSE
        INSERT INTO rollup_dirty (task_id)
        SELECT DISTINCT n.task_id FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE (n.input_tokens, n.output_tokens, n.llm_cost_usd, n.compute_cost_usd, n.usage_recorded_at,
               n.finished_at, n.job_run_id, n.task_id)
              IS DISTINCT FROM (o.input_tokens, o.output_tokens, o.llm_cost_usd, o.compute_cost_usd,
                                o.usage_recorded_at, o.finished_at, o.job_run_id, o.task_id);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER tasks_rollup_inserted AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_rollup_mark_tasks();
CREATE TRIGGER tasks_rollup_updated AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_rollup_mark_tasks();
CREATE TRIGGER task_attempts_rollup_inserted AFTER INSERT ON task_attempts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_rollup_mark_attempts();
CREATE TRIGGER task_attempts_rollup_updated AFTER UPDATE ON task_attempts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_rollup_mark_attempts();

-- Folds every visible mark: one fold at a time (a second caller returns -1 at once). The lock is
-- taken before the statement that folds, so that statement's snapshot sees every earlier fold.
-- Returns the number of tasks folded.
CREATE FUNCTION quire_rollup_fold() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    folded integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('quire.rollup.fold')) THEN
        RETURN -1;
    END IF;
    WITH marks AS (
        DELETE FROM rollup_dirty RETURNING task_id
    ), dirty AS (
        SELECT DISTINCT task_id FROM marks
    ), old AS (
        SELECT s.* FROM rollup_task_state s WHERE s.task_id IN (SELECT task_id FROM dirty)
    ), new AS (
        SELECT c.* FROM task_rollup_contrib c WHERE c.task_id IN (SELECT task_id FROM dirty)
    ), saved AS (
        INSERT INTO rollup_task_state SELECT * FROM new
        ON CONFLICT (task_id) DO UPDATE SET
            created_at = excluded.created_at, finished_at = excluded.finished_at, agent = excluded.agent,
            customer = excluded.customer, status = excluded.status, attempted = excluded.attempted,
            attempts = excluded.attempts, with_usage = excluded.with_usage,
            input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
            llm_cost_usd = excluded.llm_cost_usd, compute_cost_usd = excluded.compute_cost_usd,
            unpriced = excluded.unpriced, compute_pending = excluded.compute_pending,
            confidence_n = excluded.confidence_n, confidence_sum = excluded.confidence_sum,
            latency_bin = excluded.latency_bin, confidence_bin = excluded.confidence_bin,
            llm_bin = excluded.llm_bin, compute_bin = excluded.compute_bin, spend_bin = excluded.spend_bin
    ), signed AS (
        SELECT 1 AS sign, new.* FROM new
        UNION ALL
        SELECT -1, old.* FROM old
    ), keyed AS (
        SELECT x.*, g.grain, sc.all_customers,
               date_trunc(g.unit, x.created_at, 'UTC') AS bucket,
               CASE WHEN g.grain <> 'm' THEN date_trunc(g.unit, x.finished_at, 'UTC') END AS finished,
               CASE WHEN sc.all_customers THEN NULL ELSE x.customer END AS key_customer
        FROM signed x
        CROSS JOIN (VALUES ('m'::"char", 'month'), ('d', 'day'), ('h', 'hour')) g (grain, unit)
        CROSS JOIN (VALUES (true), (false)) sc (all_customers)
        WHERE sc.all_customers OR g.grain <> 'h'
    ), main AS (
        INSERT INTO task_rollups AS r (all_customers, grain, bucket, agent, customer, status, finished, tasks,
                                       attempted, attempts, with_usage, input_tokens, output_tokens, llm_cost_usd,
                                       compute_cost_usd, unpriced, compute_pending, confidence_n, confidence_sum)
        SELECT all_customers, grain, bucket, agent, key_customer, status, finished, sum(sign),
               sum(sign * attempted), sum(sign * attempts), sum(sign * with_usage), sum(sign * input_tokens),
               sum(sign * output_tokens), sum(sign * llm_cost_usd), sum(sign * compute_cost_usd),
               sum(sign * unpriced), sum(sign * compute_pending), sum(sign * confidence_n),
               sum(sign * confidence_sum)
        FROM keyed
        GROUP BY all_customers, grain, bucket, agent, key_customer, status, finished
        -- a task whose key and figures did not change nets to zero everywhere: nothing to write
        HAVING sum(sign) <> 0 OR sum(sign * attempts) <> 0 OR sum(sign * with_usage) <> 0
            OR sum(sign * input_tokens) <> 0 OR sum(sign * output_tokens) <> 0
            OR sum(sign * llm_cost_usd) <> 0 OR sum(sign * compute_cost_usd) <> 0
            OR sum(sign * unpriced) <> 0 OR sum(sign * compute_pending) <> 0
            OR sum(sign * confidence_n) <> 0 OR sum(sign * confidence_sum) <> 0
        ON CONFLICT (all_customers, grain, bucket, agent, customer, status, finished) DO UPDATE SET
            tasks = r.tasks + excluded.tasks, attempted = r.attempted + excluded.attempted,
            attempts = r.attempts + excluded.attempts, with_usage = r.with_usage + excluded.with_usage,
            input_tokens = r.input_tokens + excluded.input_tokens,
            output_tokens = r.output_tokens + excluded.output_tokens,
            llm_cost_usd = r.llm_cost_usd + excluded.llm_cost_usd,
            compute_cost_usd = r.compute_cost_usd + excluded.compute_cost_usd,
            unpriced = r.unpriced + excluded.unpriced, compute_pending = r.compute_pending + excluded.compute_pending,
            confidence_n = r.confidence_n + excluded.confidence_n,
            confidence_sum = r.confidence_sum + excluded.confidence_sum
    ), bins AS (
        INSERT INTO task_rollup_bins AS b (all_customers, grain, bucket, agent, customer, status, metric, bin, n)
        SELECT k.all_customers, k.grain, k.bucket, k.agent, k.key_customer, k.status, m.metric, m.bin, sum(k.sign)
        FROM keyed k
        CROSS JOIN LATERAL (VALUES ('l'::"char", k.latency_bin), ('c', k.confidence_bin), ('a', k.llm_bin),
                                   ('m', k.compute_bin), ('s', k.spend_bin)) m (metric, bin)
        WHERE m.bin IS NOT NULL AND k.grain <> 'h' AND (k.all_customers OR k.grain = 'm')
        GROUP BY k.all_customers, k.grain, k.bucket, k.agent, k.key_customer, k.status, m.metric, m.bin
        HAVING sum(k.sign) <> 0
        ON CONFLICT (all_customers, grain, bucket, agent, customer, status, metric, bin) DO UPDATE SET
            n = b.n + excluded.n
    )
    SELECT count(*) INTO folded FROM dirty;
    RETURN folded;
END $$;

-- Backfill: every existing task is marked and folded once.
INSERT INTO rollup_dirty (task_id) SELECT id FROM tasks;
SELECT quire_rollup_fold();
