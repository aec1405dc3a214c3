-- Review: documents a person must check wait in a queue claimed like tasks (SKIP LOCKED and a
-- lease); each correction is an append-only row; each review ends approved or rejected by someone.

CREATE TYPE review_status AS ENUM (
    'open',        -- waits in the queue, or is held by a reviewer until its lease ends
    'approved',    -- a reviewer signed off on the data (the extraction plus its corrections)
    'rejected',    -- a reviewer refused the document
    'superseded'   -- the task was re-extracted before anyone decided; its child has a review of its own
);

CREATE TABLE reviews (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id           bigint NOT NULL UNIQUE REFERENCES tasks (id),
    reason            text NOT NULL,         -- low_confidence, finding, flagged, sample, re-extraction
    confidence        real NOT NULL,         -- the lowest core-field confidence: the queue's order
    status            review_status NOT NULL DEFAULT 'open',
    queued_at         timestamptz NOT NULL,
    claimed_by        text,
    claimed_at        timestamptz,
    lease_expires_at  timestamptz,
    claim_token       bigint NOT NULL DEFAULT 0,  -- fencing: every claim takes a new one
    decided_by        text,
    decided_at        timestamptz,
    decision_note     text
);
-- "Next" walks this index: lowest confidence first, then oldest.
CREATE INDEX reviews_queue_idx ON reviews (confidence, queued_at, id) WHERE status = 'open';
CREATE INDEX reviews_decided_idx ON reviews (decided_at) WHERE decided_at IS NOT NULL;

-- One row per change a reviewer made to a field; never updated or deleted (triggers below).
CREATE TABLE review_corrections (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    review_id  bigint NOT NULL REFERENCES reviews (id),
    task_id    bigint NOT NULL REFERENCES tasks (id),
    field      text NOT NULL CHECK (field <> ''),
    old_value  jsonb,
    new_value  jsonb,
    actor      text NOT NULL CHECK (actor <> ''),
    at         timestamptz NOT NULL,
    reason     text
);
CREATE INDEX review_corrections_review_idx ON review_corrections (review_id, field, id);

-- One row per review change (queued, claimed, released, corrected, approved, rejected,
-- superseded); ids order the review SSE stream; never updated or deleted either.
CREATE TABLE review_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    review_id  bigint NOT NULL REFERENCES reviews (id),
    task_id    bigint NOT NULL,
    kind       text NOT NULL,
    actor      text,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX review_events_review_idx ON review_events (review_id, id);

CREATE FUNCTION quire_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: rows are never updated or deleted', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;

-- TRUNCATE is a table owner's reset (the benchmarks use it): the database's privileges guard it.
CREATE TRIGGER review_corrections_append_only BEFORE UPDATE OR DELETE ON review_corrections
    FOR EACH ROW EXECUTE FUNCTION quire_refuse_change();
CREATE TRIGGER review_events_append_only BEFORE UPDATE OR DELETE ON review_events
    FOR EACH ROW EXECUTE FUNCTION quire_refuse_change();

-- A decided review is part of the trail: it never changes again, and no review is deleted.
CREATE FUNCTION quire_reviews_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR OLD.status <> 'open' THEN
        RAISE EXCEPTION 'review % is % and can no longer change', OLD.id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER reviews_decided_stay BEFORE UPDATE OR DELETE ON reviews
    FOR EACH ROW EXECUTE FUNCTION quire_reviews_guard();

-- One NOTIFY per statement on quire_reviews, in chunks of 50 events, like quire_tasks.
CREATE FUNCTION quire_review_events_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    part record;
BEGIN
    FOR part IN
        SELECT json_agg(json_build_object('e', e.id, 'r', e.review_id, 't', e.task_id, 'k', e.kind)
                        ORDER BY e.id) AS body
        FROM (SELECT n.*, (row_number() OVER (ORDER BY n.id) - 1) / 50 AS chunk FROM new_rows n) e
        GROUP BY e.chunk ORDER BY e.chunk
    LOOP
        PERFORM pg_notify('quire_reviews', part.body::text);
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER review_events_notify AFTER INSERT ON review_events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION quire_review_events_inserted();

-- The fields that decide whether a document of a type needs a person.
CREATE FUNCTION quire_review_core_fields(document_type text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE document_type
        WHEN 'invoice' THEN ARRAY['issuer', 'invoice_number', 'issue_date', 'currency', 'total']
        WHEN 'contract' THEN ARRAY['parties', 'effective_date', 'governing_law']
        WHEN 'financial_statement' THEN ARRAY['company', 'period_end', 'currency', 'revenue']
        ELSE ARRAY[]::text[]
    END
$$;

-- The lowest confidence among a result's core fields, else the task's own confidence.
CREATE FUNCTION quire_review_confidence(result jsonb, confidence real) RETURNS real
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(
        (SELECT min(CASE WHEN jsonb_typeof(result -> 'fields' -> f -> 'confidence') = 'number'
                         THEN (result -> 'fields' -> f ->> 'confidence')::real END)
         FROM unnest(quire_review_core_fields(result ->> 'document_type')) f),
        confidence, 0)
$$;

-- A number from an agent's settings, else the default: a setting of another type must never make
-- a completion fail.
CREATE FUNCTION quire_number_setting(settings jsonb, key text, fallback real) RETURNS real
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(settings -> key) = 'number' THEN (settings ->> key)::real ELSE fallback END
$$;

-- Why a completed task needs a person, or NULL: a re-extraction of a reviewed task, a finding
-- (failed cross-check), the agent's own flag, a core field below the agent's threshold, or the
-- agent's spot-check share (picked by a hash of the id, so the same tasks whatever the timing).
CREATE FUNCTION quire_review_reason(task_id bigint, result jsonb, confidence real, agent_settings jsonb,
                                    parent_reviewed boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN parent_reviewed THEN 're-extraction'
        WHEN jsonb_typeof(result -> 'findings') = 'array' AND jsonb_array_length(result -> 'findings') > 0
            THEN 'finding'
        WHEN result ->> 'needs_review' = 'true' THEN 'flagged'
        WHEN quire_review_confidence(result, confidence)
             < quire_number_setting(agent_settings, 'review_threshold', 0.6) THEN 'low_confidence'
        WHEN (abs(hashint8(task_id)::bigint) % 10000)
             < 10000 * quire_number_setting(agent_settings, 'review_sample', 0.05) THEN 'sample'
    END
$$;

-- Statement-level: every task that just completed with a result and needs a person joins the
-- queue, in the transaction that completed it.
-- Each completed task is looked up by id (reviews, agents): nested loops over indexes, whatever the
-- statement that fired it turned off.
CREATE FUNCTION quire_tasks_to_review() RETURNS trigger LANGUAGE plpgsql SET enable_nestloop = on AS $$
BEGIN
    WITH done AS (
        SELECT n.id, n.result, n.confidence, n.parent_id, a.settings
        FROM new_rows n
        JOIN old_rows o ON o.id = n.id
        JOIN agents a ON a.name = n.agent
        WHERE n.status = 'completed' AND o.status IS DISTINCT FROM 'completed' AND n.result IS NOT NULL
    ), wanted AS (
        SELECT d.id, d.result,
               quire_review_reason(d.id, d.result, d.confidence, d.settings,
                                   EXISTS (SELECT 1 FROM reviews p WHERE p.task_id = d.parent_id)) AS reason,
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
CREATE TRIGGER tasks_to_review AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_tasks_to_review();

-- A re-extraction (a child task) ends its parent's open review: a reviewer still on it gets a
-- conflict, and the child is reviewed when it completes.
CREATE FUNCTION quire_tasks_supersede_review() RETURNS trigger LANGUAGE plpgsql SET enable_nestloop = on AS $$
BEGIN
    WITH gone AS (
        UPDATE reviews r SET status = 'superseded', decided_at = now(),
                             decision_note = 're-extracted as task ' || n.id
        FROM new_rows n
        WHERE n.parent_id IS NOT NULL AND r.task_id = n.parent_id AND r.status = 'open'
        RETURNING r.id, r.task_id
    )
    INSERT INTO review_events (review_id, task_id, kind, actor)
    SELECT g.id, g.task_id, 'superseded', nullif(current_setting('quire.actor', true), '')
    FROM gone g ORDER BY g.id;
    RETURN NULL;
END $$;
CREATE TRIGGER tasks_supersede_review AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION quire_tasks_supersede_review();

-- A reviewed document's field values now: the extraction's, with each field's last correction.
CREATE FUNCTION quire_review_values(review bigint) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_object_agg(f.field, f.value), '{}'::jsonb)
    FROM (
        SELECT e.key AS field, e.value -> 'value' AS value
        FROM reviews r JOIN tasks t ON t.id = r.task_id
        CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(t.result -> 'fields') = 'object'
                                           THEN t.result -> 'fields' ELSE '{}'::jsonb END) e
        WHERE r.id = review
          AND NOT EXISTS (SELECT 1 FROM review_corrections c WHERE c.review_id = review AND c.field = e.key)
        UNION ALL
        (SELECT DISTINCT ON (c.field) c.field, c.new_value
         FROM review_corrections c WHERE c.review_id = review
         ORDER BY c.field, c.id DESC)
    ) f
$$;

-- Per reviewed field of every decided review: what the extraction said, what the review left,
-- and whether they differ. Accuracy and correction rates count these rows and nothing else.
CREATE VIEW review_field_outcomes AS
SELECT r.id AS review_id, r.task_id, r.status, r.decided_by, r.decided_at,
       t.agent, t.customer, t.created_at,
       coalesce(t.result ->> 'extractor', 'unknown') AS extractor,
       coalesce(t.result ->> 'model', 'none') AS model,
       f.field, t.result -> 'fields' -> f.field -> 'value' AS extracted,
       fin.value AS final,
       (t.result -> 'fields' -> f.field -> 'value') IS DISTINCT FROM fin.value
           AND NOT (coalesce(t.result -> 'fields' -> f.field -> 'value', 'null'::jsonb) = 'null'::jsonb
                    AND coalesce(fin.value, 'null'::jsonb) = 'null'::jsonb) AS corrected
FROM reviews r
JOIN tasks t ON t.id = r.task_id
CROSS JOIN LATERAL (
    SELECT e.key AS field FROM jsonb_each(CASE WHEN jsonb_typeof(t.result -> 'fields') = 'object'
                                               THEN t.result -> 'fields' ELSE '{}'::jsonb END) e
    UNION
    SELECT c.field FROM review_corrections c WHERE c.review_id = r.id
) f
LEFT JOIN LATERAL (
    SELECT c.new_value AS value FROM review_corrections c
    WHERE c.review_id = r.id AND c.field = f.field ORDER BY c.id DESC LIMIT 1
) last ON true
CROSS JOIN LATERAL (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM review_corrections c WHERE c.review_id = r.id AND c.field = f.field)
                THEN last.value ELSE t.result -> 'fields' -> f.field -> 'value' END AS value
) fin
WHERE r.status IN ('approved', 'rejected');
