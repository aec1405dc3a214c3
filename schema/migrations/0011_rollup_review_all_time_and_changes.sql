-- The rollups learn three things the dashboard needs at a million tasks:
--   * "needs review" (completed with a low confidence) as a key, so that filter reads rollups, not tasks;
--   * an all-time grain ('a'), so a filter without dates reads one bucket instead of every month;
--   * a log of what each fold changed (rollup_changes, rollup_change_bins), per created hour, so an
--     open dashboard advances the figures it holds by the folds since its read instead of reading again.
-- The rollups are rebuilt from the tasks at the end (as migration 0007 backfilled them).

-- The review threshold, once for SQL; schema.stats.REVIEW_CONFIDENCE mirrors it (a test checks both).
CREATE FUNCTION quire_needs_review(status task_status, confidence real) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(status = 'completed' AND confidence < 0.6, false)
$$;

CREATE OR REPLACE VIEW task_rollup_contrib AS
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
       END AS spend_bin,
       quire_needs_review(t.status, t.confidence) AS review
FROM tasks t
CROSS JOIN LATERAL (
    SELECT count(*)::int AS attempts,
           count(*) FILTER (WHERE a.usage_recorded_at IS NOT NULL)::int AS usage_attempts,
           sum(a.input_tokens)::bigint AS input_tokens, sum(a.output_tokens)::bigint AS output_tokens,
           sum(a.llm_cost_usd) AS llm_cost_usd, sum(a.compute_cost_usd) AS compute_cost_usd,
           count(*) FILTER (WHERE coalesce(a.input_tokens, 0) + coalesce(a.output_tokens, 0) > 0
                              AND a.llm_cost_usd IS NULL)::int AS unpriced,
           count(*) FILTER (WHERE a.finished_at IS NOT NULL AND a.job_run_id IS NOT NULL
                              AND a.compute_cost_usd IS NULL)::int AS compute_pending
    FROM task_attempts a WHERE a.task_id = t.id
) s;

-- Tasks with their review flag, for the rollup reads that go to the tasks themselves.
CREATE VIEW tasks_with_review AS
SELECT t.id, t.created_at, t.finished_at, t.agent, t.customer, t.status,
       quire_needs_review(t.status, t.confidence) AS review
FROM tasks t;

ALTER TABLE rollup_task_state ADD COLUMN review boolean NOT NULL DEFAULT false;

ALTER TABLE task_rollups ADD COLUMN review boolean NOT NULL DEFAULT false;
ALTER TABLE task_rollups DROP CONSTRAINT task_rollups_grain_check;
ALTER TABLE task_rollups ADD CONSTRAINT task_rollups_grain_check CHECK (grain IN ('a', 'h', 'd', 'm'));
DROP INDEX task_rollups_key;
CREATE UNIQUE INDEX task_rollups_key ON task_rollups
    (all_customers, grain, bucket, agent, customer, status, review, finished) NULLS NOT DISTINCT;

ALTER TABLE task_rollup_bins ADD COLUMN review boolean NOT NULL DEFAULT false;
ALTER TABLE task_rollup_bins DROP CONSTRAINT task_rollup_bins_grain_check;
ALTER TABLE task_rollup_bins ADD CONSTRAINT task_rollup_bins_grain_check CHECK (grain IN ('a', 'd', 'm'));
DROP INDEX task_rollup_bins_key;
CREATE UNIQUE INDEX task_rollup_bins_key ON task_rollup_bins
    (all_customers, grain, bucket, agent, customer, status, review, metric, bin) NULLS NOT DISTINCT;

-- One row per fold that changed something; its id orders folds as they committed (folds take turns).
CREATE SEQUENCE rollup_fold_seq;
CREATE TABLE rollup_folds (
    fold_id   bigint PRIMARY KEY,
    folded_at timestamptz NOT NULL DEFAULT now()
);
-- Folds up to this id were pruned from the log: a reader holding figures older than that reads again.
CREATE TABLE rollup_log_horizon (pruned_through bigint NOT NULL);
INSERT INTO rollup_log_horizon VALUES (0);

-- What each fold changed, per created hour, finished hour, agent, customer, status and review.
CREATE TABLE rollup_changes (
    fold_id          bigint NOT NULL,
    hour             timestamptz NOT NULL,
    finished         timestamptz,
    agent            text NOT NULL,
    customer         text,
    status           task_status NOT NULL,
    review           boolean NOT NULL,
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
CREATE INDEX rollup_changes_fold ON rollup_changes (fold_id);

CREATE TABLE rollup_change_bins (
    fold_id  bigint NOT NULL,
    hour     timestamptz NOT NULL,
    agent    text NOT NULL,
    customer text,
    status   task_status NOT NULL,
    review   boolean NOT NULL,
    metric   "char" NOT NULL,
    bin      smallint NOT NULL,
    n        bigint NOT NULL
);
CREATE INDEX rollup_change_bins_fold ON rollup_change_bins (fold_id);

-- Folds every visible mark: one fold at a time (a second caller returns -1 at once). The lock is
-- taken before the statements that fold, so their snapshots see every earlier fold.
-- Also logs what the fold changed (for open dashboards) and prunes the log past 15 minutes.
-- Returns the number of tasks folded.
CREATE OR REPLACE FUNCTION quire_rollup_fold() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    folded integer;
    this_fold bigint;
    pruned bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('quire.rollup.fold')) THEN
        RETURN -1;
    END IF;
    WITH marks AS (
        DELETE FROM rollup_dirty RETURNING task_id
    )
    SELECT array_agg(DISTINCT task_id) INTO ids FROM marks;
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
    ), keyed AS (
        SELECT x.*, g.grain, sc.all_customers,
               CASE WHEN g.grain = 'a' THEN '0001-01-01 00:00:00+00'::timestamptz
                    ELSE date_trunc(g.unit, x.created_at, 'UTC') END AS bucket,
               CASE WHEN g.grain IN ('d', 'h') THEN date_trunc(g.unit, x.finished_at, 'UTC') END AS finished,
               CASE WHEN sc.all_customers THEN NULL ELSE x.customer END AS key_customer
        FROM signed x
        CROSS JOIN (VALUES ('a'::"char", 'year'), ('m', 'month'), ('d', 'day'), ('h', 'hour')) g (grain, unit)
        CROSS JOIN (VALUES (true), (false)) sc (all_customers)
        WHERE sc.all_customers OR g.grain <> 'h'
    ), main AS (
        INSERT INTO task_rollups AS r (all_customers, grain, bucket, agent, customer, status, review, finished,
                                       tasks, attempted, attempts, with_usage, input_tokens, output_tokens,
                                       llm_cost_usd, compute_cost_usd, unpriced, compute_pending, confidence_n,
                                       confidence_sum)
        SELECT all_customers, grain, bucket, agent, key_customer, status, review, finished, sum(sign),
               sum(sign * attempted), sum(sign * attempts), sum(sign * with_usage), sum(sign * input_tokens),
               sum(sign * output_tokens), sum(sign * llm_cost_usd), sum(sign * compute_cost_usd),
               sum(sign * unpriced), sum(sign * compute_pending), sum(sign * confidence_n),
               sum(sign * confidence_sum)
        FROM keyed
        GROUP BY all_customers, grain, bucket, agent, key_customer, status, review, finished
        -- a task whose key and figures did not change nets to zero everywhere: nothing to write
        HAVING sum(sign) <> 0 OR sum(sign * attempts) <> 0 OR sum(sign * with_usage) <> 0
            OR sum(sign * input_tokens) <> 0 OR sum(sign * output_tokens) <> 0
            OR sum(sign * llm_cost_usd) <> 0 OR sum(sign * compute_cost_usd) <> 0
            OR sum(sign * unpriced) <> 0 OR sum(sign * compute_pending) <> 0
            OR sum(sign * confidence_n) <> 0 OR sum(sign * confidence_sum) <> 0
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
               sum(k.sign)
        FROM keyed k
        CROSS JOIN LATERAL (VALUES ('l'::"char", k.latency_bin), ('c', k.confidence_bin), ('a', k.llm_bin),
                                   ('m', k.compute_bin), ('s', k.spend_bin)) m (metric, bin)
        WHERE m.bin IS NOT NULL AND k.grain <> 'h' AND (k.all_customers OR k.grain IN ('a', 'm'))
        GROUP BY k.all_customers, k.grain, k.bucket, k.agent, k.key_customer, k.status, k.review, m.metric, m.bin
        HAVING sum(k.sign) <> 0
        ON CONFLICT (all_customers, grain, bucket, agent, customer, status, review, metric, bin) DO UPDATE SET
            n = b.n + excluded.n
    ), changes AS (
        INSERT INTO rollup_changes (fold_id, hour, finished, agent, customer, status, review, tasks, attempted,
                                    attempts, with_usage, input_tokens, output_tokens, llm_cost_usd,
                                    compute_cost_usd, unpriced, compute_pending, confidence_n, confidence_sum)
        SELECT this_fold, date_trunc('hour', created_at, 'UTC'), date_trunc('hour', finished_at, 'UTC'), agent,
               customer, status, review, sum(sign), sum(sign * attempted), sum(sign * attempts),
               sum(sign * with_usage), sum(sign * input_tokens), sum(sign * output_tokens),
               sum(sign * llm_cost_usd), sum(sign * compute_cost_usd), sum(sign * unpriced),
               sum(sign * compute_pending), sum(sign * confidence_n), sum(sign * confidence_sum)
        FROM signed
        GROUP BY 2, 3, 4, 5, 6, 7
        HAVING sum(sign) <> 0 OR sum(sign * attempts) <> 0 OR sum(sign * with_usage) <> 0
            OR sum(sign * input_tokens) <> 0 OR sum(sign * output_tokens) <> 0
            OR sum(sign * llm_cost_usd) <> 0 OR sum(sign * compute_cost_usd) <> 0
            OR sum(sign * unpriced) <> 0 OR sum(sign * compute_pending) <> 0
            OR sum(sign * confidence_n) <> 0 OR sum(sign * confidence_sum) <> 0
    ), change_bins AS (
        INSERT INTO rollup_change_bins (fold_id, hour, agent, customer, status, review, metric, bin, n)
        SELECT this_fold, date_trunc('hour', x.created_at, 'UTC'), x.agent, x.customer, x.status, x.review,
               m.metric, m.bin, sum(x.sign)
        FROM signed x
        CROSS JOIN LATERAL (VALUES ('l'::"char", x.latency_bin), ('c', x.confidence_bin), ('a', x.llm_bin),
                                   ('m', x.compute_bin), ('s', x.spend_bin)) m (metric, bin)
        WHERE m.bin IS NOT NULL
        GROUP BY 2, 3, 4, 5, 6, 7, 8
        HAVING sum(x.sign) <> 0
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

-- Rebuild: every task is marked and folded once more, now with its review flag and all-time rows.
TRUNCATE task_rollups, task_rollup_bins, rollup_task_state, rollup_dirty;
INSERT INTO rollup_dirty (task_id) SELECT id FROM tasks;
SELECT quire_rollup_fold();
-- The rebuild's own log is of no use to a reader: nobody held figures before it.
TRUNCATE rollup_changes, rollup_change_bins;
UPDATE rollup_log_horizon SET pruned_through = (SELECT coalesce(max(fold_id), 0) FROM rollup_folds);
