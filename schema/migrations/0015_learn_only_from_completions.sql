-- A statement that completes no task learns nothing from it: the token-learning trigger returns at
-- once unless one of the statement's rows is completed. The rest of the function is as in 0012.
CREATE OR REPLACE FUNCTION quire_tasks_learn_tokens() RETURNS trigger LANGUAGE plpgsql
SET enable_nestloop = on AS $$
BEGIN
    -- Most statements that update tasks complete none of them (claims, heartbeat-free lease
    -- writes, hand-backs): they leave here after a look at their own rows, instead of running the
    -- learning query (about 0.2 ms, a tenth of a claim of 16 tasks).
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
