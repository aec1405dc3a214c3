-- name: attempt_list_unreconciled_batch
-- Ended attempts that named a trace but recorded no spend: the cost reconciler reads their traces
-- (recent ones only, so a trace that never arrives is not read forever).
SELECT a.id, a.trace_id, a.agent, ag.price_input_per_mtok, ag.price_output_per_mtok
FROM task_attempts a JOIN agents ag ON ag.name = a.agent
WHERE a.trace_id IS NOT NULL AND a.usage_recorded_at IS NULL AND a.status <> 'processing'
  AND a.finished_at > coalesce(%(now)s, now()) - make_interval(secs => %(window_seconds)s)
  AND NOT (a.id = ANY(%(skip)s::bigint[]))
ORDER BY a.id
LIMIT %(batch)s;

-- name: attempt_list_recorded_batch
-- Attempts whose spend was reported with a trace id, after a cursor, to check against the trace.
SELECT a.id, a.trace_id, a.input_tokens, a.output_tokens, a.llm_cost_usd
FROM task_attempts a
WHERE a.trace_id IS NOT NULL AND a.usage_recorded_at IS NOT NULL AND a.id > %(after_id)s
ORDER BY a.id
LIMIT %(batch)s;

-- name: attempt_record_trace_usage_once
-- Spend read from the trace, recorded only if nothing was recorded before (a callback wins a race).
UPDATE task_attempts SET
    input_tokens = %(input_tokens)s,
    output_tokens = %(output_tokens)s,
    llm_cost_usd = %(llm_cost_usd)s,
    llm_unpriced = %(llm_cost_usd)s IS NULL AND %(input_tokens)s + %(output_tokens)s > 0,
    usage_recorded_at = coalesce(%(now)s, now())
WHERE id = %(attempt_id)s AND usage_recorded_at IS NULL
RETURNING id;

-- name: task_next_due_one
-- Seconds until the earliest backing-off task becomes claimable: nothing notifies when it does.
-- A task waits past now either because it was put back after its creation (tasks_backoff_idx
-- holds those) or because it was made at a time still ahead of now (an enqueue given a later
-- `now`, as simulations do: read from the end of tasks_created_id_idx). Neither reads the backlog.
SELECT extract(epoch FROM least(
           (SELECT min(t.run_after) FROM tasks t
            WHERE t.status = 'enqueued' AND t.run_after > t.created_at AND t.run_after > coalesce(%(now)s, now())),
           (SELECT min(t.run_after) FROM tasks t
            WHERE t.status = 'enqueued' AND t.created_at > coalesce(%(now)s, now())
              AND t.run_after > coalesce(%(now)s, now())))
       - coalesce(%(now)s, now()))::float8 AS wait_seconds;

-- name: channel_listen_tasks
-- The worker's LISTEN connection subscribes to the task events the triggers publish.
LISTEN quire_tasks;

-- name: channel_listen_agents
-- The same connection hears of agent configuration changes (workers cache the configuration).
LISTEN quire_agents;

-- name: channel_listen_reviews
-- And of review changes (queued, claimed, corrected, approved, rejected), for the pages and the SSE stream.
LISTEN quire_reviews;

-- name: channel_listening_one
-- Health check of a LISTEN connection: a connection that lost its subscription must reconnect.
SELECT ARRAY['quire_tasks', 'quire_agents', 'quire_reviews'] <@ ARRAY(SELECT pg_listening_channels()::text) AS listening;

-- name: database_exists_one
-- Whether the database MLflow keeps its traces in exists yet on this server.
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = %(name)s) AS present;

-- name: database_create
-- Creates the MLflow database beside the queue's ({name} is an identifier composed by the caller).
CREATE DATABASE {name};

-- name: tracking_lock_setup
-- Serialises MLflow's first-time table creation between workers starting at once.
SELECT pg_advisory_lock(hashtext('quire.mlflow.setup'));

-- name: tracking_unlock_setup
-- Releases the lock taken by tracking_lock_setup.
SELECT pg_advisory_unlock(hashtext('quire.mlflow.setup'));

-- name: tracking_store_present_one
-- Whether MLflow has created its tables in this database (it records its schema version there).
SELECT to_regclass('public.alembic_version') IS NOT NULL AS present;

-- name: tracking_experiment_present_one
-- Whether MLflow's experiments table (its tables exist) holds this active experiment.
SELECT EXISTS (SELECT 1 FROM experiments WHERE name = %(name)s AND lifecycle_stage = 'active') AS present;

-- name: task_waiting_for_executors_one
-- Whether an agent of these executors has a task in the queue (held or not, due or not): the
-- worker starts MLflow's first set-up once an agent whose runs trace has work.
SELECT EXISTS (
    SELECT 1 FROM tasks t
    WHERE t.status = 'enqueued'
      AND t.agent = ANY(ARRAY(SELECT a.name FROM agents a WHERE a.executor = ANY(%(executors)s::text[])))
) AS waiting;
