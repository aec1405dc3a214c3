-- Learned reservations and the adaptive throttle (migration 0007 landed the agents NOTIFY first).

-- Statements that change no row notify nothing (an adaptive-throttle update often changes none).
DROP TRIGGER agents_changed ON agents;
DROP FUNCTION quire_agents_changed();

CREATE FUNCTION quire_agents_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed_rows) THEN
        PERFORM pg_notify('quire_agents', '');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER agents_inserted AFTER INSERT ON agents REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_agents_written();
CREATE TRIGGER agents_updated AFTER UPDATE ON agents REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_agents_written();
CREATE TRIGGER agents_deleted AFTER DELETE ON agents REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_agents_written();

-- What each agent's documents actually cost, learned from settled attempts: decayed sums for a
-- least-squares line tokens = a + b * pages, per document type and over all types ('*').
CREATE TABLE agent_token_rates (
    agent          text NOT NULL REFERENCES agents (name) ON DELETE CASCADE,
    document_type  text NOT NULL,
    samples        bigint NOT NULL DEFAULT 0,              -- attempts learned from, ever
    w              double precision NOT NULL DEFAULT 0,    -- decayed count
    sp             double precision NOT NULL DEFAULT 0,    -- decayed sum of pages
    st             double precision NOT NULL DEFAULT 0,    -- decayed sum of tokens
    spp            double precision NOT NULL DEFAULT 0,    -- decayed sum of pages squared
    spt            double precision NOT NULL DEFAULT 0,    -- decayed sum of pages times tokens
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (agent, document_type)
);

-- The learned token cost of a document of `pages` pages (or of its size), with a 10% margin;
-- NULL until three attempts were learned from, so the static estimate is used until then.
CREATE FUNCTION quire_learned_tokens(p_agent text, p_type text, p_pages integer, p_bytes bigint)
RETURNS integer LANGUAGE sql STABLE AS $$
    WITH r AS (
        SELECT * FROM agent_token_rates
        WHERE agent = p_agent AND document_type = coalesce(p_type, '*') AND samples >= 3 AND sp > 0
    ), slope AS (
        SELECT r.*, CASE WHEN w * spp - sp * sp > 1e-6 * w * w THEN (w * spt - sp * st) / (w * spp - sp * sp)
                         ELSE st / sp END AS b
        FROM r
    ), line AS (
        -- A negative intercept or slope (too little spread in page counts): tokens per page alone.
        SELECT CASE WHEN b < 0 OR st - b * sp < 0 THEN 0 ELSE (st - b * sp) / w END AS a,
               CASE WHEN b < 0 OR st - b * sp < 0 THEN st / sp ELSE b END AS b
        FROM slope
    )
    SELECT greatest(1, ceil(1.1 * (a + b * greatest(1, coalesce(p_pages, ceil(p_bytes / 50000.0), 4)))))::integer
    FROM line
$$;

-- Learns from every task that completes with its attempt's token usage recorded.
CREATE FUNCTION quire_tasks_learn_tokens() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agent_token_rates AS r (agent, document_type, samples, w, sp, st, spp, spt, updated_at)
    SELECT g.agent, g.document_type, count(*), count(*), sum(g.p), sum(g.t), sum(g.p * g.p),
           sum(g.p * g.t), max(g.at)
    FROM (
        SELECT n.agent, k.document_type, greatest(n.pages, 1)::float8 AS p,
               (a.input_tokens + a.output_tokens)::float8 AS t, n.finished_at AS at
        FROM new_rows n
        JOIN old_rows o ON o.id = n.id
        JOIN task_attempts a ON a.id = n.current_attempt_id
        CROSS JOIN LATERAL (VALUES ('*'), (coalesce(n.result ->> 'document_type', 'other'))) AS k (document_type)
        WHERE n.status = 'completed' AND o.status <> 'completed' AND n.pages IS NOT NULL
          AND a.input_tokens + a.output_tokens > 0
    ) g
    GROUP BY g.agent, g.document_type
    ON CONFLICT (agent, document_type) DO UPDATE SET
        samples = r.samples + excluded.samples,
        -- Older attempts weigh less: each settling statement keeps 90% of what was learned.
        w = r.w * 0.9 + excluded.w, sp = r.sp * 0.9 + excluded.sp, st = r.st * 0.9 + excluded.st,
        spp = r.spp * 0.9 + excluded.spp, spt = r.spt * 0.9 + excluded.spt,
        updated_at = greatest(r.updated_at, excluded.updated_at);
    RETURN NULL;
END $$;

CREATE TRIGGER tasks_learn_tokens AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_tasks_learn_tokens();

-- Adaptive throttle: what the model endpoint's rate limits taught (NULL: the configured limit).
ALTER TABLE agents
    ADD COLUMN effective_tpm bigint CHECK (effective_tpm > 0),
    ADD COLUMN effective_concurrency integer CHECK (effective_concurrency > 0),
    ADD COLUMN throttle_ceiling_tpm bigint,          -- the TPM that met the last rate limit
    ADD COLUMN throttled_until timestamptz,          -- Retry-After: nothing is admitted before
    ADD COLUMN rate_limited_total bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_rate_limited_at timestamptz;

-- Whether the task's estimate is the static guess from its size, which a learned one replaces.
ALTER TABLE tasks ADD COLUMN estimate_is_static boolean NOT NULL DEFAULT false;

-- The token window counts attempts until a minute after they ended.
CREATE INDEX task_attempts_finished_idx ON task_attempts (agent, finished_at);
