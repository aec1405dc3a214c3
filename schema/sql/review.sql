-- name: review_claim_held_one
-- A reviewer who already holds an open review gets it back (a reload, a second tab), lease renewed.
UPDATE reviews r SET lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s)
WHERE r.id = (
    SELECT h.id FROM reviews h
    WHERE h.status = 'open' AND h.claimed_by = %(who)s AND h.lease_expires_at > coalesce(%(now)s, now())
    ORDER BY h.claimed_at DESC, h.id LIMIT 1
    FOR UPDATE
)
RETURNING r.id, r.claim_token;

-- name: review_claim_next
-- The next open review nobody holds, lowest confidence first, then oldest, within the dashboard's
-- filters; SKIP LOCKED so reviewers asking at once each get a different one. Logs the claim.
WITH pick AS (
    SELECT r.id
    FROM reviews r
    JOIN tasks t ON t.id = r.task_id
    WHERE r.status = 'open'
      AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= coalesce(%(now)s, now()))
      AND {task_filter}
    ORDER BY r.confidence, r.queued_at, r.id
    LIMIT 1
    FOR UPDATE OF r SKIP LOCKED
), claimed AS (
    UPDATE reviews r SET claimed_by = %(who)s, claimed_at = coalesce(%(now)s, now()),
                         lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s),
                         claim_token = r.claim_token + 1
    FROM pick WHERE r.id = pick.id
    RETURNING r.id, r.task_id, r.claim_token
), logged AS (
    INSERT INTO review_events (review_id, task_id, kind, actor)
    SELECT c.id, c.task_id, 'claimed', %(who)s FROM claimed c
)
SELECT c.id, c.claim_token FROM claimed c;

-- name: review_claim_one
-- One chosen review, for a reviewer who opens it by task: taken unless someone else's lease holds it.
WITH claimed AS (
    UPDATE reviews r SET claimed_by = %(who)s, claimed_at = coalesce(%(now)s, now()),
                         lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s),
                         claim_token = r.claim_token + 1
    WHERE r.id = %(review_id)s AND r.status = 'open'
      AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= coalesce(%(now)s, now()) OR r.claimed_by = %(who)s)
    RETURNING r.id, r.task_id, r.claim_token
), logged AS (
    INSERT INTO review_events (review_id, task_id, kind, actor)
    SELECT c.id, c.task_id, 'claimed', %(who)s FROM claimed c
)
SELECT c.id, c.claim_token FROM claimed c;

-- name: review_lock_one
-- The review row, locked: saves, approvals and rejections check their claim against it first.
SELECT r.id, r.task_id, r.status::text AS status, r.claimed_by, r.claim_token, r.lease_expires_at,
       r.decided_by, r.decided_at, r.decision_note
FROM reviews r WHERE r.id = %(review_id)s
FOR UPDATE;

-- name: review_values_one
-- The document's field values now: the extraction with each field's last correction applied.
SELECT quire_review_values(%(review_id)s) AS values;

-- name: review_correction_insert_batch
-- The changed fields of one save, one append-only row each, and one event for the save.
WITH ins AS (
    INSERT INTO review_corrections (review_id, task_id, field, old_value, new_value, actor, at, reason)
    SELECT %(review_id)s, %(task_id)s, c.field, c.old_value, c.new_value, %(who)s,
           coalesce(%(now)s, now()), %(reason)s
    FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(field text, old_value jsonb, new_value jsonb)
    RETURNING id
)
INSERT INTO review_events (review_id, task_id, kind, actor)
SELECT %(review_id)s, %(task_id)s, 'corrected', %(who)s
WHERE EXISTS (SELECT 1 FROM ins);

-- name: review_extend_lease_if_current
-- Keeps a reviewer's claim while the page is open: only the holder of the current claim token.
UPDATE reviews r SET lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s)
WHERE r.id = %(review_id)s AND r.status = 'open' AND r.claim_token = %(claim_token)s
  AND r.claimed_by = %(who)s
RETURNING r.id;

-- name: review_decide_if_current
-- Approves or rejects, only for the holder of the current claim of an open review; logs it.
WITH decided AS (
    UPDATE reviews r SET status = %(status)s::review_status, decided_by = %(who)s,
                         decided_at = coalesce(%(now)s, now()), decision_note = %(note)s,
                         lease_expires_at = NULL
    WHERE r.id = %(review_id)s AND r.status = 'open' AND r.claim_token = %(claim_token)s
      AND r.claimed_by = %(who)s
    RETURNING r.id, r.task_id, r.status
), logged AS (
    INSERT INTO review_events (review_id, task_id, kind, actor)
    SELECT d.id, d.task_id, d.status::text, %(who)s FROM decided d
)
SELECT d.id FROM decided d;

-- name: review_release_if_current
-- Hands a claimed review back to the queue at once (a reviewer skips it), instead of at lease end.
WITH released AS (
    UPDATE reviews r SET claimed_by = NULL, lease_expires_at = NULL
    WHERE r.id = %(review_id)s AND r.status = 'open' AND r.claim_token = %(claim_token)s
      AND r.claimed_by = %(who)s
    RETURNING r.id, r.task_id
), logged AS (
    INSERT INTO review_events (review_id, task_id, kind, actor)
    SELECT x.id, x.task_id, 'released', %(who)s FROM released x
)
SELECT x.id FROM released x;

-- name: review_read_one
-- One review with its task and extraction, and the document's values now.
SELECT r.id, r.task_id, r.reason, r.confidence, r.status::text AS status, r.queued_at, r.claimed_by,
       r.claimed_at, r.lease_expires_at, r.claim_token, r.decided_by, r.decided_at, r.decision_note,
       t.agent, t.customer, t.document_name, t.document_uri, t.document_sha256, t.pages, t.parent_id,
       t.created_at AS task_created_at, t.result, quire_review_values(r.id) AS values
FROM reviews r JOIN tasks t ON t.id = r.task_id
WHERE r.id = %(review_id)s;

-- name: review_of_task_one
-- The review of one task, if it has one.
SELECT r.id FROM reviews r WHERE r.task_id = %(task_id)s;

-- name: review_history_of_task
-- The reviews of a task and of the tasks it re-extracted, newest first: old reviews stay readable.
WITH RECURSIVE line AS (
    SELECT t.id, t.parent_id, 0 AS depth FROM tasks t WHERE t.id = %(task_id)s
    UNION ALL
    SELECT p.id, p.parent_id, l.depth + 1 FROM tasks p JOIN line l ON p.id = l.parent_id WHERE l.depth < 50
)
SELECT r.id, r.task_id, r.status::text AS status, r.reason, r.decided_by, r.decided_at, r.decision_note,
       (SELECT count(*)::int FROM review_corrections c WHERE c.review_id = r.id) AS corrections
FROM line l JOIN reviews r ON r.task_id = l.id
ORDER BY l.depth, r.id DESC;

-- name: review_corrections_of_one
-- The trail of one review, oldest first.
SELECT c.id, c.review_id, c.task_id, c.field, c.old_value, c.new_value, c.actor, c.at, c.reason
FROM review_corrections c WHERE c.review_id = %(review_id)s ORDER BY c.id;

-- name: review_queue_filtered
-- The open reviews in claim order (those held by a lease say by whom), for the queue's list.
SELECT r.id, r.task_id, r.reason, r.confidence, r.queued_at, t.agent, t.customer, t.document_name,
       CASE WHEN r.lease_expires_at > coalesce(%(now)s, now()) THEN r.claimed_by END AS held_by
FROM reviews r JOIN tasks t ON t.id = r.task_id
WHERE r.status = 'open' AND {task_filter}
ORDER BY r.confidence, r.queued_at, r.id
LIMIT %(limit)s;

-- name: review_backlog_filtered
-- How many documents wait for a person, how many of them a reviewer holds, and the decisions so far.
SELECT count(*) FILTER (WHERE r.status = 'open')::int AS open,
       count(*) FILTER (WHERE r.status = 'open' AND r.lease_expires_at > coalesce(%(now)s, now()))::int AS held,
       count(*) FILTER (WHERE r.status = 'approved')::int AS approved,
       count(*) FILTER (WHERE r.status = 'rejected')::int AS rejected,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM r.decided_at - r.claimed_at))
           FILTER (WHERE r.status IN ('approved', 'rejected')) AS review_p50_s,
       percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM r.decided_at - r.claimed_at))
           FILTER (WHERE r.status IN ('approved', 'rejected')) AS review_p90_s
FROM reviews r JOIN tasks t ON t.id = r.task_id
WHERE {task_filter};

-- name: review_approved_per_day_filtered
-- Documents approved per UTC day of the decision.
SELECT (r.decided_at AT TIME ZONE 'UTC')::date AS day, count(*)::int AS approved
FROM reviews r JOIN tasks t ON t.id = r.task_id
WHERE r.status = 'approved' AND {task_filter}
GROUP BY 1 ORDER BY 1;

-- name: review_field_rates_filtered
-- Per field of approved documents: how many were reviewed and how many a reviewer corrected.
SELECT o.field, count(*)::int AS reviewed, count(*) FILTER (WHERE o.corrected)::int AS corrected
FROM review_field_outcomes o JOIN tasks t ON t.id = o.task_id
WHERE o.status = 'approved' AND {task_filter}
GROUP BY o.field ORDER BY o.field;

-- name: review_accuracy_filtered
-- Field accuracy of approved documents per agent, extractor and model: fields left as extracted.
SELECT o.agent, o.extractor, o.model, count(DISTINCT o.review_id)::int AS documents,
       count(*)::int AS fields, count(*) FILTER (WHERE NOT o.corrected)::int AS right
FROM review_field_outcomes o JOIN tasks t ON t.id = o.task_id
WHERE o.status = 'approved' AND {task_filter}
GROUP BY o.agent, o.extractor, o.model ORDER BY o.agent, o.extractor, o.model;

-- name: review_export_filtered
-- Approved documents with their corrected values and who approved them, for export.
SELECT r.id AS review_id, r.task_id, t.agent, t.customer, t.document_name,
       t.result ->> 'document_type' AS document_type, r.decided_by AS approved_by,
       r.decided_at AS approved_at, quire_review_values(r.id) AS values,
       coalesce((SELECT jsonb_agg(DISTINCT c.field) FROM review_corrections c WHERE c.review_id = r.id),
                '[]'::jsonb) AS corrected_fields
FROM reviews r JOIN tasks t ON t.id = r.task_id
WHERE r.status = 'approved' AND {task_filter}
ORDER BY r.decided_at, r.id;

-- name: review_events_after
-- Review events after an id, for the review stream's catch-up.
SELECT e.id, e.review_id, e.task_id, e.kind, e.actor, e.at
FROM review_events e WHERE e.id > %(after_id)s ORDER BY e.id LIMIT %(limit)s;

-- name: review_events_last_id
-- The newest review event id, where a fresh stream starts.
SELECT coalesce(max(e.id), 0)::bigint AS last_id FROM review_events e;
