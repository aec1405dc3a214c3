-- What an agent's documents were learned to cost, read once per statement instead of once per row.
--
-- quire_learned_tokens(agent, type, pages, bytes, chars) was a SQL function that read the agent's
-- learned rates and, without a text line, called its four-argument twin from inside itself. No
-- planner inlines either (they read a table), so each row paid a function's set-up, twice where
-- the second ran: about 200 µs a row for a document without a character count (a scan), 16 µs with
-- one. A claim computed it for every task it claimed once the agent had learned, and a throttled
-- admission for each of its candidates whether or not it had: 640 candidates, 0.22 s a claim.
--
-- Now one definition in two parts: quire_token_line reads an agent's lines (text and pages) from
-- its rates row, and quire_tokens_on_line, a plain expression the planner inlines, applies them to
-- one document. The claim and the admission read the line once per agent; quire_learned_tokens
-- keeps its signatures for every other caller and is both parts together.

CREATE FUNCTION quire_token_line(p_agent text, p_type text)
    RETURNS TABLE (text_a float8, text_b float8, page_a float8, page_b float8)
    -- A table of at most one row, so that the planner inlines it into the query that reads it.
    LANGUAGE sql STABLE AS $$
    -- Tokens = a + b × characters, and a + b × pages; each NULL until learned (3 samples). A negative
    -- intercept or slope (too little spread in sizes) falls back to tokens per character, or page.
    SELECT CASE WHEN r.text_samples >= 3 AND r.sc > 0
                THEN CASE WHEN x.bt < 0 OR r.stc - x.bt * r.sc < 0 THEN 0 ELSE (r.stc - x.bt * r.sc) / r.wc END END,
           CASE WHEN r.text_samples >= 3 AND r.sc > 0
                THEN CASE WHEN x.bt < 0 OR r.stc - x.bt * r.sc < 0 THEN r.stc / r.sc ELSE x.bt END END,
           CASE WHEN r.samples >= 3 AND r.sp > 0
                THEN CASE WHEN x.bp < 0 OR r.st - x.bp * r.sp < 0 THEN 0 ELSE (r.st - x.bp * r.sp) / r.w END END,
           CASE WHEN r.samples >= 3 AND r.sp > 0
                THEN CASE WHEN x.bp < 0 OR r.st - x.bp * r.sp < 0 THEN r.st / r.sp ELSE x.bp END END
    FROM agent_token_rates r
    CROSS JOIN LATERAL (SELECT
        CASE WHEN r.sc > 0 THEN CASE WHEN r.wc * r.scc - r.sc * r.sc > 1e-6 * r.sc * r.sc
                                     THEN (r.wc * r.sct - r.sc * r.stc) / (r.wc * r.scc - r.sc * r.sc)
                                     ELSE r.stc / r.sc END END AS bt,
        CASE WHEN r.sp > 0 THEN CASE WHEN r.w * r.spp - r.sp * r.sp > 1e-6 * r.w * r.w
                                     THEN (r.w * r.spt - r.sp * r.st) / (r.w * r.spp - r.sp * r.sp)
                                     ELSE r.st / r.sp END END AS bp) x
    WHERE r.agent = p_agent AND r.document_type = coalesce(p_type, '*')
$$;

-- One document on the lines: from its characters when both are known, else from its pages (its
-- size at 50 kB a page, else four pages), with 10% over the line, bounded like any reservation.
CREATE FUNCTION quire_tokens_on_line(text_a float8, text_b float8, page_a float8, page_b float8,
                                     p_pages integer, p_bytes bigint, p_chars integer) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_chars IS NOT NULL AND text_b IS NOT NULL
                THEN least(200000000::float8, greatest(1::float8, ceil(1.1 * (text_a + text_b * p_chars::float8))))::integer
                WHEN page_b IS NOT NULL
                THEN least(200000000::float8, greatest(1::float8, ceil(1.1 * (page_a + page_b * greatest(1::float8,
                         coalesce(p_pages::float8, ceil(p_bytes / 50000.0)::float8, 4::float8))))))::integer
           END
$$;

CREATE OR REPLACE FUNCTION quire_learned_tokens(p_agent text, p_type text, p_pages integer, p_bytes bigint,
                                                p_chars integer) RETURNS integer
    LANGUAGE sql STABLE AS $$
    SELECT quire_tokens_on_line(l.text_a, l.text_b, l.page_a, l.page_b, p_pages, p_bytes, p_chars)
    FROM quire_token_line(p_agent, p_type) l
$$;

CREATE OR REPLACE FUNCTION quire_learned_tokens(p_agent text, p_type text, p_pages integer, p_bytes bigint)
    RETURNS integer
    LANGUAGE sql STABLE AS $$
    SELECT quire_tokens_on_line(NULL, NULL, l.page_a, l.page_b, p_pages, p_bytes, NULL)
    FROM quire_token_line(p_agent, p_type) l
$$;
