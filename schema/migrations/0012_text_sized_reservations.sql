-- Reservations sized by a document's text: a model's tokens follow the characters it reads far more
-- closely than its pages (a page may hold a short letter or a dense price list).

-- The characters of the document's text layer, counted at upload (NULL: unknown, or a scan).
ALTER TABLE tasks ADD COLUMN document_chars integer CHECK (document_chars > 0);

-- Decayed sums for a second least-squares line, tokens = a + b * characters, over the attempts
-- whose documents' characters are known.
ALTER TABLE agent_token_rates
    ADD COLUMN text_samples bigint NOT NULL DEFAULT 0,          -- attempts with known characters, ever
    ADD COLUMN wc  double precision NOT NULL DEFAULT 0,         -- decayed count
    ADD COLUMN sc  double precision NOT NULL DEFAULT 0,         -- decayed sum of characters
    ADD COLUMN stc double precision NOT NULL DEFAULT 0,         -- decayed sum of their tokens
    ADD COLUMN scc double precision NOT NULL DEFAULT 0,         -- decayed sum of characters squared
    ADD COLUMN sct double precision NOT NULL DEFAULT 0;         -- decayed sum of characters times tokens

-- The learned token cost of a document of `p_chars` characters, with a 10% margin; without three
-- such attempts learned from (or without its characters), the line by pages.
CREATE FUNCTION quire_learned_tokens(p_agent text, p_type text, p_pages integer, p_bytes bigint,
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
        SELECT greatest(1, ceil(1.1 * (a + b * p_chars)))::integer FROM line
    ), quire_learned_tokens(p_agent, p_type, p_pages, p_bytes))
$$;

-- Learns from every task that completes with its attempt's token usage recorded: the line by
-- pages, and the line by characters where they are known.
-- (Nested loops on, for itself, while settlement turns them off for its batch: see migration 10.)
CREATE OR REPLACE FUNCTION quire_tasks_learn_tokens() RETURNS trigger LANGUAGE plpgsql
SET enable_nestloop = on AS $$
BEGIN
    INSERT INTO agent_token_rates AS r (agent, document_type, samples, w, sp, st, spp, spt,
                                        text_samples, wc, sc, stc, scc, sct, updated_at)
    SELECT g.agent, g.document_type, count(*), count(*), sum(g.p), sum(g.t), sum(g.p * g.p),
           sum(g.p * g.t), count(g.c), count(g.c), coalesce(sum(g.c), 0),
           coalesce(sum(g.t) FILTER (WHERE g.c IS NOT NULL), 0), coalesce(sum(g.c * g.c), 0),
           coalesce(sum(g.c * g.t), 0), max(g.at)
    FROM (
        SELECT n.agent, k.document_type, greatest(n.pages, 1)::float8 AS p,
               (a.input_tokens + a.output_tokens)::float8 AS t, n.document_chars::float8 AS c,
               n.finished_at AS at
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
