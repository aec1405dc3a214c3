-- The histogram bins in two partitions, all customers together and per customer.
--   * Nine bin rows in ten are a customer's, and every fold updates a customer's week, month and
--     all-time rows. In one heap, the few rows of all customers' days were spread among them: at ten
--     million tasks folded in bounded steps, the 15,298 bin rows of 90 days for all customers sat on
--     4,126 pages, and their read took 15.9 ms. The same rows in a table of their own, in the order
--     the folds wrote them, sat on 659 pages and read in 7.8 ms (docs/BENCHMARKS.md).
--   * Every read names its scope (x.all_customers = a value), so it plans one partition only; the
--     fold's upsert routes each row to its scope's partition.
--   * Each partition keeps half of each page free, as the table did (migration 0025). The rows are
--     copied in key order, as that migration's CLUSTER left them.
-- Under the fold's lock: a fold waits for the copy, then writes to the partitions.

SELECT pg_advisory_xact_lock(hashtext('quire.rollup.fold'));

-- The rows set aside first, so that the new table's constraints take the old ones' names.
CREATE TEMPORARY TABLE rollup_bins_copy ON COMMIT DROP AS
SELECT all_customers, grain, bucket, agent, customer, status, metric, bin, n, review FROM task_rollup_bins;
DROP TABLE task_rollup_bins;

CREATE TABLE task_rollup_bins (
    all_customers boolean NOT NULL,
    grain "char" NOT NULL CONSTRAINT task_rollup_bins_grain_check CHECK (grain IN ('a', 'm', 'w', 'd')),
    bucket timestamptz NOT NULL,
    agent text NOT NULL,
    customer text,
    status task_status NOT NULL,
    metric "char" NOT NULL,
    bin smallint NOT NULL,
    n bigint NOT NULL,
    review boolean NOT NULL DEFAULT false
) PARTITION BY LIST (all_customers);

CREATE TABLE task_rollup_bins_all PARTITION OF task_rollup_bins FOR VALUES IN (true)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02);
CREATE TABLE task_rollup_bins_per_customer PARTITION OF task_rollup_bins FOR VALUES IN (false)
    WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.02);

INSERT INTO task_rollup_bins (all_customers, grain, bucket, agent, customer, status, metric, bin, n, review)
SELECT all_customers, grain, bucket, agent, customer, status, metric, bin, n, review
FROM rollup_bins_copy
ORDER BY all_customers, grain, bucket, agent, customer, status, review, metric, bin;

CREATE UNIQUE INDEX task_rollup_bins_key
    ON task_rollup_bins (all_customers, grain, bucket, agent, customer, status, review, metric, bin) NULLS NOT DISTINCT;
CREATE INDEX task_rollup_bins_customer ON task_rollup_bins (grain, customer, bucket, status) WHERE NOT all_customers;

ANALYZE task_rollup_bins;
