-- A customer's histograms per ISO week as well as per month.
--   * A customer's histogram bins were kept per month only (and for all time): a range that cuts a
--     month read the cut part from the tasks themselves. One customer's failed tasks over a year
--     starting on the 6th read 26 days raw, and that part grows with the tasks of those days: 1.5 ms
--     at a million tasks, about 22 ms at ten million (docs/BENCHMARKS.md). Week bins (grain 'w', the
--     ISO weeks of the totals' week rows) leave at most six days raw on each side of a week run:
--     schema.rollups.plan takes the weeks up to a month that fits whole, and reads the rest raw.
--   * All customers' bins stay per month and day: their raw part is under a day already.
--   * task_rollup_bins_customer: a customer's bins by customer, then bucket, as task_rollups_customer
--     (migration 0024) for the totals, and then status. The key index has the agent ahead of the
--     customer, so a one-customer read walked every customer's bins of its months; and a status
--     filter visited every status's rows of the customer (one customer's failed tasks over a year at
--     ten million tasks: 5,512 pages for 1,460 rows, then 1,207 with the status in the index).
-- The week bins of what is folded are built from each task's saved contribution (rollup_task_state),
-- under the fold's lock: marks not folded yet move from that saved contribution when they are. They
-- are counted first, into a temporary table, and only then is the bins table locked to take them:
-- dashboards wait for the insert only (ten million tasks: 36 s of counting, then 21 s locked).
-- One hashed count per metric: counting all five at once through a lateral list sorted 48 million
-- rows, and the migration took 158 s at ten million tasks (docs/BENCHMARKS.md).

SELECT pg_advisory_xact_lock(hashtext('quire.rollup.fold'));

SET LOCAL work_mem = '64MB';  -- each count's hash table in memory (about 40 MB at ten million tasks)
CREATE TEMPORARY TABLE customer_week_bins ON COMMIT DROP AS
SELECT date_trunc('week', created_at, 'UTC') AS bucket, agent, customer, status, review, 'l'::"char" AS metric,
       latency_bin AS bin, count(*) AS n
FROM rollup_task_state WHERE latency_bin IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 7
UNION ALL
SELECT date_trunc('week', created_at, 'UTC'), agent, customer, status, review, 'c', confidence_bin, count(*)
FROM rollup_task_state WHERE confidence_bin IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 7
UNION ALL
SELECT date_trunc('week', created_at, 'UTC'), agent, customer, status, review, 'a', llm_bin, count(*)
FROM rollup_task_state WHERE llm_bin IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 7
UNION ALL
SELECT date_trunc('week', created_at, 'UTC'), agent, customer, status, review, 'm', compute_bin, count(*)
FROM rollup_task_state WHERE compute_bin IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 7
UNION ALL
SELECT date_trunc('week', created_at, 'UTC'), agent, customer, status, review, 's', spend_bin, count(*)
FROM rollup_task_state WHERE spend_bin IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 7;

ALTER TABLE task_rollup_bins DROP CONSTRAINT task_rollup_bins_grain_check;
ALTER TABLE task_rollup_bins ADD CONSTRAINT task_rollup_bins_grain_check CHECK (grain IN ('a', 'm', 'w', 'd'));

INSERT INTO task_rollup_bins (all_customers, grain, bucket, agent, customer, status, review, metric, bin, n)
SELECT false, 'w', bucket, agent, customer, status, review, metric, bin, n FROM customer_week_bins;

CREATE INDEX task_rollup_bins_customer ON task_rollup_bins (grain, customer, bucket, status) WHERE NOT all_customers;

-- Folds the visible marks, or the first max_marks of them: one fold at a time (a second caller
-- returns -1 at once). The lock is taken before the statements that fold, so their snapshots see
-- every earlier fold. Also logs what the fold changed (for open dashboards) and prunes the log past
-- 15 minutes. Returns the number of tasks folded. JIT off: see migration 0014.
CREATE OR REPLACE FUNCTION quire_rollup_fold(max_marks integer DEFAULT NULL) RETURNS integer LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
    ids bigint[];
    folded integer;
    this_fold bigint;
    pruned bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('quire.rollup.fold')) THEN
        RETURN -1;
    END IF;
    IF max_marks IS NULL THEN
        WITH marks AS (
            DELETE FROM rollup_dirty RETURNING task_id
        )
        SELECT array_agg(DISTINCT task_id) INTO ids FROM marks;
    ELSE
        -- A bounded step: the first max_marks marks by their place in the table (a TID scan).
        WITH marks AS (
            DELETE FROM rollup_dirty
            WHERE ctid = ANY(ARRAY(SELECT d.ctid FROM rollup_dirty d LIMIT max_marks))
            RETURNING task_id
        )
        SELECT array_agg(DISTINCT task_id) INTO ids FROM marks;
    END IF;
    IF ids IS NULL THEN
        RETURN 0;
    END IF;
    -- Tasks changed after the marks were taken have marks of their own, left for the next fold: each
    -- fold moves a task from its saved contribution to its current one, so nothing counts twice.
    this_fold := nextval('rollup_fold_seq');
    -- The ids as an array, not a join: the marks' statistics are always stale (see rollup_pending_contrib).
    WITH old AS (
        SELECT s.* FROM rollup_task_state s WHERE s.task_id = ANY(ids)
    ), new AS (
        SELECT c.* FROM task_rollup_contrib c WHERE c.task_id = ANY(ids)
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
            llm_bin = excluded.llm_bin, compute_bin = excluded.compute_bin, spend_bin = excluded.spend_bin,
            review = excluded.review
    ), signed AS (
        SELECT 1 AS sign, new.* FROM new
        UNION ALL
        SELECT -1, old.* FROM old
    ), net AS (
        -- The old and new contributions netted per created hour, finished hour, key and bin values
        -- first: the thousands of tasks a busy fold moves mostly share these, so the grains and bins
        -- below expand a few rows each instead of every task twice. (Every grain truncates the
        -- created and finished times to an hour or coarser, so nothing finer is needed.)
        SELECT date_trunc('hour', created_at, 'UTC') AS hour, date_trunc('hour', finished_at, 'UTC') AS finished_hour,
               agent, customer, status, review, latency_bin, confidence_bin, llm_bin, compute_bin, spend_bin,
               sum(sign) AS tasks, sum(sign * attempted) AS attempted, sum(sign * attempts) AS attempts,
               sum(sign * with_usage) AS with_usage, sum(sign * input_tokens) AS input_tokens,
               sum(sign * output_tokens) AS output_tokens, sum(sign * llm_cost_usd) AS llm_cost_usd,
               sum(sign * compute_cost_usd) AS compute_cost_usd, sum(sign * unpriced) AS unpriced,
               sum(sign * compute_pending) AS compute_pending, sum(sign * confidence_n) AS confidence_n,
               sum(sign * confidence_sum) AS confidence_sum
        FROM signed
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
        -- a task whose key and figures did not change nets to zero everywhere: nothing to write
        HAVING sum(sign) <> 0 OR sum(sign * attempted) <> 0 OR sum(sign * attempts) <> 0
            OR sum(sign * with_usage) <> 0 OR sum(sign * input_tokens) <> 0 OR sum(sign * output_tokens) <> 0
            OR sum(sign * llm_cost_usd) <> 0 OR sum(sign * compute_cost_usd) <> 0
            OR sum(sign * unpriced) <> 0 OR sum(sign * compute_pending) <> 0
            OR sum(sign * confidence_n) <> 0 OR sum(sign * confidence_sum) <> 0
    ), keyed AS (
        SELECT x.*, g.grain, sc.all_customers,
               CASE WHEN g.grain = 'a' THEN '0001-01-01 00:00:00+00'::timestamptz
                    ELSE date_trunc(g.unit, x.hour, 'UTC') END AS bucket,
               CASE WHEN g.grain IN ('w', 'd', 'h') THEN date_trunc(g.unit, x.finished_hour, 'UTC') END AS finished,
               CASE WHEN sc.all_customers THEN NULL ELSE x.customer END AS key_customer
        FROM net x
        CROSS JOIN (VALUES ('a'::"char", 'year'), ('m', 'month'), ('w', 'week'), ('d', 'day'), ('h', 'hour')) g (grain, unit)
        CROSS JOIN (VALUES (true), (false)) sc (all_customers)
        WHERE sc.all_customers OR g.grain <> 'h'
    ), main AS (
        INSERT INTO task_rollups AS r (all_customers, grain, bucket, agent, customer, status, review, finished,
                                       tasks, attempted, attempts, with_usage, input_tokens, output_tokens,
                                       llm_cost_usd, compute_cost_usd, unpriced, compute_pending, confidence_n,
                                       confidence_sum)
        SELECT all_customers, grain, bucket, agent, key_customer, status, review, finished, sum(tasks),
               sum(attempted), sum(attempts), sum(with_usage), sum(input_tokens), sum(output_tokens),
               sum(llm_cost_usd), sum(compute_cost_usd), sum(unpriced), sum(compute_pending), sum(confidence_n),
               sum(confidence_sum)
        FROM keyed
        GROUP BY all_customers, grain, bucket, agent, key_customer, status, review, finished
        HAVING sum(tasks) <> 0 OR sum(attempts) <> 0 OR sum(with_usage) <> 0
            OR sum(input_tokens) <> 0 OR sum(output_tokens) <> 0
            OR sum(llm_cost_usd) <> 0 OR sum(compute_cost_usd) <> 0
            OR sum(unpriced) <> 0 OR sum(compute_pending) <> 0
            OR sum(confidence_n) <> 0 OR sum(confidence_sum) <> 0
        ON CONFLICT (all_customers, grain, bucket, agent, customer, status, review, finished) DO UPDATE SET
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
        INSERT INTO task_rollup_bins AS b (all_customers, grain, bucket, agent, customer, status, review, metric,
                                           bin, n)
        SELECT k.all_customers, k.grain, k.bucket, k.agent, k.key_customer, k.status, k.review, m.metric, m.bin,
               sum(k.tasks)
        FROM keyed k
        CROSS JOIN LATERAL (VALUES ('l'::"char", k.latency_bin), ('c', k.confidence_bin), ('a', k.llm_bin),
                                   ('m', k.compute_bin), ('s', k.spend_bin)) m (metric, bin)
        -- per month and day for all customers, per month and week for one (schema.rollups.BINS_GRAINS)
        WHERE m.bin IS NOT NULL AND k.grain IN ('a', 'm', CASE WHEN k.all_customers THEN 'd' ELSE 'w' END)
        GROUP BY k.all_customers, k.grain, k.bucket, k.agent, k.key_customer, k.status, k.review, m.metric, m.bin
        HAVING sum(k.tasks) <> 0
        ON CONFLICT (all_customers, grain, bucket, agent, customer, status, review, metric, bin) DO UPDATE SET
            n = b.n + excluded.n
    ), changes AS (
        INSERT INTO rollup_changes (fold_id, hour, finished, agent, customer, status, review, tasks, attempted,
                                    attempts, with_usage, input_tokens, output_tokens, llm_cost_usd,
                                    compute_cost_usd, unpriced, compute_pending, confidence_n, confidence_sum)
        SELECT this_fold, hour, finished_hour, agent, customer, status, review, sum(tasks), sum(attempted),
               sum(attempts), sum(with_usage), sum(input_tokens), sum(output_tokens), sum(llm_cost_usd),
               sum(compute_cost_usd), sum(unpriced), sum(compute_pending), sum(confidence_n), sum(confidence_sum)
        FROM net
        GROUP BY 2, 3, 4, 5, 6, 7
        HAVING sum(tasks) <> 0 OR sum(attempts) <> 0 OR sum(with_usage) <> 0
            OR sum(input_tokens) <> 0 OR sum(output_tokens) <> 0
            OR sum(llm_cost_usd) <> 0 OR sum(compute_cost_usd) <> 0
            OR sum(unpriced) <> 0 OR sum(compute_pending) <> 0
            OR sum(confidence_n) <> 0 OR sum(confidence_sum) <> 0
    ), change_bins AS (
        INSERT INTO rollup_change_bins (fold_id, hour, agent, customer, status, review, metric, bin, n)
        SELECT this_fold, x.hour, x.agent, x.customer, x.status, x.review, m.metric, m.bin, sum(x.tasks)
        FROM net x
        CROSS JOIN LATERAL (VALUES ('l'::"char", x.latency_bin), ('c', x.confidence_bin), ('a', x.llm_bin),
                                   ('m', x.compute_bin), ('s', x.spend_bin)) m (metric, bin)
        WHERE m.bin IS NOT NULL
        GROUP BY 2, 3, 4, 5, 6, 7, 8
        HAVING sum(x.tasks) <> 0
    )
    SELECT cardinality(ids) INTO folded;
    INSERT INTO rollup_folds (fold_id) VALUES (this_fold);
    -- Open dashboards read the log every second or so: 15 minutes of it is plenty.
    WITH gone AS (
        DELETE FROM rollup_folds WHERE folded_at < now() - interval '15 minutes' RETURNING fold_id
    )
    SELECT max(fold_id) INTO pruned FROM gone;
    IF pruned IS NOT NULL THEN
        DELETE FROM rollup_changes WHERE fold_id <= pruned;
        DELETE FROM rollup_change_bins WHERE fold_id <= pruned;
        UPDATE rollup_log_horizon SET pruned_through = greatest(pruned_through, pruned);
    END IF;
    RETURN folded;
END $$;
