-- Hostile numbers: learned token costs that cannot overflow, a bounded Retry-After pause, and a
-- halt that stops claiming for one agent whose runs show it cannot run (the model endpoint refused
-- it) or whose claim failed, while every other agent goes on.

-- The most one attempt may reserve or teach: the callback contract's bound on input plus output
-- tokens (10^8 each, docs/CONTRACTS.md). Learned lines are computed in double precision and
-- clamped to it before the cast to integer, so no report within the contract can overflow them.
CREATE OR REPLACE FUNCTION quire_learned_tokens(p_agent text, p_type text, p_pages integer, p_bytes bigint)
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
    SELECT least(200000000::float8, greatest(1::float8, ceil(1.1 * (a + b * greatest(1::float8,
               coalesce(p_pages::float8, ceil(p_bytes / 50000.0)::float8, 4::float8))))))::integer
    FROM line
$$;

CREATE OR REPLACE FUNCTION quire_learned_tokens(p_agent text, p_type text, p_pages integer, p_bytes bigint,
                                                p_chars integer)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT coalesce((
        WITH r AS (
            SELECT * FROM agent_token_rates
            WHERE p_chars IS NOT NULL AND agent = p_agent AND document_type = coalesce(p_type, '*')
              AND text_samples >= 3 AND sc > 0
        ), slope AS (
            SELECT r.*, CASE WHEN wc * scc - sc * sc > 1e-6 * sc * sc THEN (wc * sct - sc * stc) / (wc * scc - sc * sc)
                             ELSE stc / sc END AS b
            FROM r
        ), line AS (
            -- A negative intercept or slope (too little spread in sizes): tokens per character alone.
            SELECT CASE WHEN b < 0 OR stc - b * sc < 0 THEN 0 ELSE (stc - b * sc) / wc END AS a,
                   CASE WHEN b < 0 OR stc - b * sc < 0 THEN stc / sc ELSE b END AS b
            FROM slope
        )
        SELECT least(200000000::float8, greatest(1::float8, ceil(1.1 * (a + b * p_chars::float8))))::integer
        FROM line
    ), quire_learned_tokens(p_agent, p_type, p_pages, p_bytes))
$$;

-- Learns from every task that completes with its attempt's token usage recorded, as in 0015, with
-- each attempt's tokens taken at most at the contract's bound (attempts recorded before the bound
-- existed may hold more).
CREATE OR REPLACE FUNCTION quire_tasks_learn_tokens() RETURNS trigger LANGUAGE plpgsql
SET enable_nestloop = on AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.status = 'completed') THEN
        RETURN NULL;
    END IF;
    INSERT INTO agent_token_rates AS r (agent, document_type, samples, w, sp, st, spp, spt,
                                        text_samples, wc, sc, stc, scc, sct, updated_at)
    SELECT g.agent, g.document_type, count(*), count(*), sum(g.p), sum(g.t), sum(g.p * g.p),
           sum(g.p * g.t), count(g.c), count(g.c), coalesce(sum(g.c), 0),
           coalesce(sum(g.t) FILTER (WHERE g.c IS NOT NULL), 0), coalesce(sum(g.c * g.c), 0),
           coalesce(sum(g.c * g.t), 0), max(g.at)
    FROM (
        SELECT n.agent, k.document_type, greatest(n.pages, 1)::float8 AS p,
               least(a.input_tokens::float8 + a.output_tokens::float8, 200000000::float8) AS t,
               n.document_chars::float8 AS c, n.finished_at AS at
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
        text_samples = r.text_samples + excluded.text_samples,
        wc = CASE WHEN excluded.wc > 0 THEN r.wc * 0.9 + excluded.wc ELSE r.wc END,
        sc = CASE WHEN excluded.wc > 0 THEN r.sc * 0.9 + excluded.sc ELSE r.sc END,
        stc = CASE WHEN excluded.wc > 0 THEN r.stc * 0.9 + excluded.stc ELSE r.stc END,
        scc = CASE WHEN excluded.wc > 0 THEN r.scc * 0.9 + excluded.scc ELSE r.scc END,
        sct = CASE WHEN excluded.wc > 0 THEN r.sct * 0.9 + excluded.sct ELSE r.sct END,
        updated_at = greatest(r.updated_at, excluded.updated_at);
    RETURN NULL;
END $$;

-- A Retry-After pauses an agent for at most an hour from the report that carried it; pauses
-- written before that bound are cut to it.
UPDATE agents SET throttled_until = now() + interval '1 hour'
WHERE throttled_until > now() + interval '1 hour';

-- Why claims for an agent stopped on what its runs showed, not on its configuration (which
-- config_error covers): the model endpoint refused it for good (HTTP 401, 403, 404), or its own
-- claim failed on its data. NULL: it runs. The claim skips the agent while set; a change to its
-- configuration or an operator clears it.
ALTER TABLE agents
    ADD COLUMN halt_reason text CHECK (length(halt_reason) <= 4000),
    ADD COLUMN halted_at timestamptz;
