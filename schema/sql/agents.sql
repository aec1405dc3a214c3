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
    -- A halt (the endpoint refused the agent, or its claim failed) ends when what it runs with changes.
    halt_reason = CASE WHEN (agents.executor, agents.model, agents.settings)
                            IS DISTINCT FROM (excluded.executor, excluded.model, excluded.settings)
                       THEN NULL ELSE agents.halt_reason END,
    halted_at = CASE WHEN (agents.executor, agents.model, agents.settings)
                          IS DISTINCT FROM (excluded.executor, excluded.model, excluded.settings)
                     THEN NULL ELSE agents.halted_at END,
    updated_at = coalesce(%(now)s, now())
RETURNING *;

-- name: agent_load_one
-- What admission needs to know about the work of one agent already admitted: tasks in flight and
-- tokens reserved (actual usage once reported, else the estimate) of attempts running or ended
-- in the trailing minute, and
-- the clock admission decides by.
SELECT
    coalesce(%(now)s, now()) AS now,
    (SELECT count(*) FROM tasks
      WHERE agent = %(agent)s AND status = 'processing') AS in_flight,
    (SELECT win.tokens FROM quire_window_tokens(%(agent)s, coalesce(%(now)s, now())) win) AS reserved_tokens;

-- name: agent_backlog_list
-- Agents with work that is claimable now, for the claim loop.
SELECT a.name, a.executor
FROM agents a
WHERE a.config_error IS NULL AND a.halt_reason IS NULL
  AND (a.paused_at IS NULL OR a.paused_until <= coalesce(%(now)s, now()))
  AND EXISTS (SELECT 1 FROM tasks t
               WHERE t.agent = a.name AND t.status = 'enqueued' AND NOT t.held
                 AND t.run_after <= coalesce(%(now)s, now()))
ORDER BY a.name;

-- name: agent_set_config_error
-- Stores what a check of the agent's configuration found (NULL: it can run); the claim skips the
-- agent while set. Written only on change, so repeated checks stay quiet.
UPDATE agents SET config_error = %(error)s
WHERE name = %(agent)s AND config_error IS DISTINCT FROM %(error)s
RETURNING name;

-- name: agent_halt_if_running
-- Stops claiming for an agent that cannot run (the first reason is kept); its tasks wait.
UPDATE agents SET halt_reason = left(%(reason)s, 4000), halted_at = coalesce(%(now)s, now())
WHERE name = %(agent)s AND halt_reason IS NULL
RETURNING name;

-- name: agent_clear_halt
-- An operator lets a halted agent's tasks be claimed again.
UPDATE agents SET halt_reason = NULL, halted_at = NULL
WHERE name = %(agent)s AND halt_reason IS NOT NULL
RETURNING name;

-- name: agent_throttle_back_off
-- The model endpoint rate-limited an attempt (HTTP 429): cut the agent's effective TPM and
-- concurrency to a share (seven tenths) of the endpoint's quota as best known, remember that quota,
-- and admit nothing until its Retry-After. The quota is the limit the endpoint stated
-- (%(stated_tpm)s), else what it served the agent in the minute before the first 429
-- (%(limited_at)s, kept between the attempt's start and now; unknown: the minute before now): the
-- tokens of the attempts that reported in that minute (and the second after, while the attempts
-- served just before the 429 settle), never more than the agent's limit. Reports of attempts
-- started before the last back-off only count: one cut per round of work, as AIMD takes one per
-- round trip.
-- The agent's running tasks: as they stood when the report came (%(in_flight)s), else counted now.
WITH anchor AS (
    SELECT least(coalesce(%(now)s, now()),
                 greatest(coalesce(%(limited_at)s, coalesce(%(now)s, now())), a.started_at)) AS at,
           a.started_at AS attempt_started_at
    FROM task_attempts a WHERE a.id = %(attempt_id)s
), observed AS (
    SELECT coalesce(%(in_flight)s::bigint,
                    (SELECT count(*) FROM tasks WHERE agent = %(agent)s AND status = 'processing')) AS in_flight,
           -- Tokens the endpoint actually served in that minute (reported, not reserved).
           (SELECT coalesce(sum(input_tokens + output_tokens), 0)
              FROM task_attempts
             WHERE agent = %(agent)s
               AND started_at > n.at - interval '1 day'  -- reads the window index
               AND usage_recorded_at > n.at - interval '60 seconds'
               AND usage_recorded_at <= n.at + interval '1 second') AS window_tokens,
           n.attempt_started_at
    FROM anchor n
), ran AS (
    SELECT a.name,
           -- The quota: as stated, else the rate it sent at (its limit, or what the endpoint served
           -- it in the minute if that was less).
           least(coalesce(a.effective_tpm, a.max_tpm),
                 coalesce(%(stated_tpm)s::bigint, greatest(o.window_tokens, %(floor_tpm)s))) AS tpm,
           coalesce(a.effective_concurrency, a.max_concurrent_tasks, greatest(o.in_flight, 1)) AS concurrency,
           o.window_tokens,
           a.last_rate_limited_at IS NULL OR o.attempt_started_at >= a.last_rate_limited_at AS cut
    FROM agents a, observed o
    WHERE a.name = %(agent)s
)
UPDATE agents a SET
    effective_tpm = CASE WHEN r.cut THEN greatest(%(floor_tpm)s, floor(r.tpm * %(factor)s::numeric))::bigint
                         ELSE a.effective_tpm END,
    effective_concurrency = CASE WHEN r.cut THEN greatest(1, floor(r.concurrency * %(factor)s::numeric))::integer
                                 ELSE a.effective_concurrency END,
    throttle_ceiling_tpm = CASE WHEN r.cut THEN r.tpm ELSE a.throttle_ceiling_tpm END,
    last_rate_limited_at = CASE WHEN r.cut THEN coalesce(%(now)s, now()) ELSE a.last_rate_limited_at END,
    throttled_until = greatest(a.throttled_until,
                               coalesce(%(now)s, now()) + make_interval(secs => %(retry_after)s)),
    rate_limited_total = a.rate_limited_total + %(count)s
FROM ran r
WHERE a.name = r.name
RETURNING a.effective_tpm, a.effective_concurrency, r.cut;

-- name: agent_throttle_recover_list
-- Attempts of backed-off agents ran without a rate limit: raise each agent's effective TPM and
-- concurrency additively (per attempt), up to a share (nineteen twentieths) of the quota learned at
-- the last limit. After a quiet spell that cap rises by one step (%(step)s of the configured TPM)
-- a minute, probing for a quota raised meanwhile, up to the configured limits, where the adaptive
-- limits end (NULL); a jump straight back to the configured TPM met the same limit again at once.
-- An agent with no configured TPM goes back to none after the quiet spell.
WITH ok AS (
    SELECT agent, sum(n)::integer AS n
    FROM unnest(%(agents)s::text[], %(counts)s::integer[]) AS u(agent, n)
    GROUP BY agent
), target AS (
    SELECT a.name, ok.n,
           CASE WHEN a.last_rate_limited_at > coalesce(%(now)s, now()) - make_interval(secs => %(quiet_seconds)s)
                THEN least(coalesce(a.max_tpm, a.throttle_ceiling_tpm), floor(%(ceiling_share)s * a.throttle_ceiling_tpm))
                WHEN a.max_tpm IS NULL OR a.throttle_ceiling_tpm IS NULL THEN a.max_tpm
                ELSE least(a.max_tpm, floor(%(ceiling_share)s * a.throttle_ceiling_tpm
                                            + %(step)s * a.max_tpm * (1 + floor(extract(epoch FROM
                                                coalesce(%(now)s, now()) - a.last_rate_limited_at
                                                - make_interval(secs => %(quiet_seconds)s)) / 60))))
           END AS tpm_cap,
           greatest(100, ceil(%(step)s * coalesce(a.max_tpm, a.throttle_ceiling_tpm, 0))) AS tpm_step
    FROM agents a JOIN ok ON ok.agent = a.name
    WHERE a.effective_tpm IS NOT NULL OR a.effective_concurrency IS NOT NULL
)
UPDATE agents a SET
    effective_tpm = CASE
        WHEN a.effective_tpm IS NULL THEN NULL
        WHEN t.tpm_cap IS NULL THEN NULL
        WHEN a.max_tpm IS NOT NULL AND a.effective_tpm + t.n * t.tpm_step >= a.max_tpm THEN NULL
        ELSE greatest(a.effective_tpm, least(t.tpm_cap, a.effective_tpm + t.n * t.tpm_step))::bigint END,
    effective_concurrency = CASE
        WHEN a.effective_concurrency IS NULL THEN NULL
        WHEN a.max_concurrent_tasks IS NOT NULL AND a.effective_concurrency + t.n >= a.max_concurrent_tasks THEN NULL
        WHEN a.max_concurrent_tasks IS NULL AND t.tpm_cap IS NULL THEN NULL
        ELSE a.effective_concurrency + t.n END
FROM target t
WHERE a.name = t.name
RETURNING a.name, a.effective_tpm, a.effective_concurrency;

-- name: agent_admission_reopens_one
-- When a throttled agent's admission may next admit more without any run ending: when its
-- Retry-After pause ends, else when the oldest ended attempt in its token window leaves it (NULL:
-- only running attempts hold the window, and the end of one wakes the claimer anyway).
SELECT extract(epoch FROM (
    CASE WHEN a.throttled_until > coalesce(%(now)s, now()) THEN a.throttled_until
         -- The first end, or start of one that never ended, in the window, each from its index.
         ELSE least((SELECT min(t.finished_at) FROM task_attempts t
                      WHERE t.agent = a.name AND t.status <> 'processing'
                        AND t.finished_at > coalesce(%(now)s, now()) - interval '60 seconds'),
                    (SELECT min(t.started_at) FROM task_attempts t
                      WHERE t.agent = a.name AND t.status <> 'processing' AND t.finished_at IS NULL
                        AND t.started_at > coalesce(%(now)s, now()) - interval '60 seconds'))
              + interval '60 seconds'
    END - coalesce(%(now)s, now())))::float8 AS seconds
FROM agents a
WHERE a.name = %(agent)s;

-- name: agent_pause
-- Pauses an agent until %(until)s (NULL: until resumed): no claim starts its tasks, the running
-- ones finish. Who paused it, when and why are kept for the dashboard.
UPDATE agents SET paused_until = %(until)s, paused_reason = %(reason)s,
                  paused_by = %(actor)s, paused_at = coalesce(%(now)s, now()),
                  updated_at = coalesce(%(now)s, now())
WHERE name = %(agent)s
RETURNING *;

-- name: agent_resume
-- Ends an agent's pause at once; its waiting tasks are claimable again.
UPDATE agents SET paused_until = NULL, paused_reason = NULL, paused_by = NULL, paused_at = NULL,
                  updated_at = coalesce(%(now)s, now())
WHERE name = %(agent)s
RETURNING *;
