-- The review trigger fires on every statement that updates tasks (each claim, settlement, lease
-- extension and requeue) and did its whole work each time.
--
-- A statement in which no task became completed (a claim, a heartbeat's lease extension, a requeue)
-- now returns at once, as the token-learning trigger does.
--
-- Whether a re-extraction's parent was reviewed is looked up by the parent's id, and only for the
-- tasks that have a parent: as an EXISTS, the planner hashed the whole reviews table on each
-- settlement instead, a cost that grew with every review ever queued.
--
-- quire_review_confidence is written without a subquery, so the planner inlines it into the
-- statement instead of calling it as a function for each task (0.34 µs a call instead of 2.4 µs on
-- 100,000 rows): the lowest confidence of the core fields is least() over them, which like min()
-- skips the fields without a numeric confidence. quire_review_core_fields stays the list of those
-- fields; a test holds the two to the same lists.

CREATE FUNCTION quire_review_field_confidence(fields jsonb, field text) RETURNS real
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(fields -> field -> 'confidence') = 'number'
                THEN (fields -> field ->> 'confidence')::real END
$$;

CREATE OR REPLACE FUNCTION quire_review_confidence(result jsonb, confidence real) RETURNS real
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(
        CASE result ->> 'document_type'
            WHEN 'invoice' THEN least(quire_review_field_confidence(result -> 'fields', 'issuer'),
                                      quire_review_field_confidence(result -> 'fields', 'invoice_number'),
                                      quire_review_field_confidence(result -> 'fields', 'issue_date'),
                                      quire_review_field_confidence(result -> 'fields', 'currency'),
                                      quire_review_field_confidence(result -> 'fields', 'total'))
            WHEN 'contract' THEN least(quire_review_field_confidence(result -> 'fields', 'parties'),
                                       quire_review_field_confidence(result -> 'fields', 'effective_date'),
                                       quire_review_field_confidence(result -> 'fields', 'governing_law'))
            WHEN 'financial_statement' THEN least(quire_review_field_confidence(result -> 'fields', 'company'),
                                                  quire_review_field_confidence(result -> 'fields', 'period_end'),
                                                  quire_review_field_confidence(result -> 'fields', 'currency'),
                                                  quire_review_field_confidence(result -> 'fields', 'revenue'))
        END,
        confidence, 0)
$$;

CREATE OR REPLACE FUNCTION quire_tasks_to_review() RETURNS trigger LANGUAGE plpgsql SET enable_nestloop = on AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.status = 'completed' AND n.result IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    WITH done AS (
        SELECT n.id, n.result, n.confidence, n.parent_id, a.settings
        FROM new_rows n
        JOIN old_rows o ON o.id = n.id
        JOIN agents a ON a.name = n.agent
        WHERE n.status = 'completed' AND o.status IS DISTINCT FROM 'completed' AND n.result IS NOT NULL
    ), wanted AS (
        SELECT d.id, d.result,
               quire_review_reason(d.id, d.result, d.confidence, d.settings,
                                   d.parent_id IS NOT NULL
                                   AND (SELECT true FROM reviews p WHERE p.task_id = d.parent_id) IS NOT NULL)
                   AS reason,
               quire_review_confidence(d.result, d.confidence) AS confidence
        FROM done d
    ), queued AS (
        INSERT INTO reviews (task_id, reason, confidence, queued_at)
        SELECT w.id, w.reason, w.confidence, now() FROM wanted w WHERE w.reason IS NOT NULL
        ORDER BY w.id
        ON CONFLICT (task_id) DO NOTHING
        RETURNING id, task_id
    )
    INSERT INTO review_events (review_id, task_id, kind, actor)
    SELECT q.id, q.task_id, 'queued', NULL FROM queued q ORDER BY q.id;
    RETURN NULL;
END $$;
