-- name: agent_get
-- The configuration of one agent, read without locking (enqueue, defaults).
SELECT * FROM agents WHERE name = %(agent)s;

-- name: agent_list
-- Every configured agent, for the claim loop and the dashboard filters.
SELECT * FROM agents ORDER BY name;

-- name: agent_lock_for_admission
-- Serialises admission per agent: claimers of a throttled agent take turns on this row lock, so
-- each one counts in-flight work and reserved tokens after the previous one has committed.
SELECT * FROM agents WHERE name = %(agent)s FOR UPDATE;

-- name: agent_upsert
-- Creates or replaces an agent's configuration (the caller merged it with the stored one).
INSERT INTO agents (name, max_concurrent_tasks, max_tpm, lease_seconds, starvation_seconds,
                    executor, model, price_input_per_mtok, price_output_per_mtok, settings)
VALUES (%(name)s, %(max_concurrent_tasks)s, %(max_tpm)s, %(lease_seconds)s, %(starvation_seconds)s,
        %(executor)s, %(model)s, %(price_input_per_mtok)s, %(price_output_per_mtok)s, %(settings)s)
ON CONFLICT (name) DO UPDATE SET
    max_concurrent_tasks = excluded.max_concurrent_tasks,
    max_tpm = excluded.max_tpm,
    lease_seconds = excluded.lease_seconds,
    starvation_seconds = excluded.starvation_seconds,
    executor = excluded.executor,
    model = excluded.model,
    price_input_per_mtok = excluded.price_input_per_mtok,
    price_output_per_mtok = excluded.price_output_per_mtok,
    settings = excluded.settings,
    updated_at = now()
RETURNING *;

-- name: agent_load_one
-- What admission needs to know about the work of one agent already admitted: tasks in flight and
-- tokens reserved (actual usage once reported, else the estimate) over the trailing minute, and
-- the clock admission decides by.
SELECT
    coalesce(%(now)s, now()) AS now,
    (SELECT count(*) FROM tasks
      WHERE agent = %(agent)s AND status = 'processing') AS in_flight,
    (SELECT coalesce(sum(coalesce(input_tokens + output_tokens, estimated_tokens)), 0)
       FROM task_attempts
      WHERE agent = %(agent)s
        AND (status = 'processing'
             OR started_at > coalesce(%(now)s, now()) - interval '60 seconds')) AS reserved_tokens;

-- name: agent_backlog_list
-- Agents with work that is claimable now, for the claim loop.
SELECT a.name, a.executor
FROM agents a
WHERE a.config_error IS NULL AND EXISTS (SELECT 1 FROM tasks t
               WHERE t.agent = a.name AND t.status = 'enqueued'
                 AND t.run_after <= coalesce(%(now)s, now()))
ORDER BY a.name;

-- name: agent_set_config_error
-- Stores what a check of the agent's configuration found (NULL: it can run); the claim skips the
-- agent while set. Written only on change, so repeated checks stay quiet.
UPDATE agents SET config_error = %(error)s
WHERE name = %(agent)s AND config_error IS DISTINCT FROM %(error)s
RETURNING name;
