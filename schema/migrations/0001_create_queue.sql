-- The queue: agents (throttle configuration and admission lock), tasks, attempts, and the
-- append-only event log that feeds NOTIFY, the SSE stream and each task's timeline.

CREATE TYPE task_status AS ENUM ('enqueued', 'processing', 'completed', 'failed', 'cancelled');

CREATE TYPE attempt_status AS ENUM (
    'processing',   -- claimed, running
    'completed',    -- reported a result that completed the task
    'failed',       -- reported a failure
    'lost',         -- lease expired without a report; the sweeper took the task back
    'superseded',   -- another attempt of the same task completed it first
    'cancelled',    -- the task was cancelled while this attempt ran
    'handed_back'   -- the worker gave the task back on shutdown
);

CREATE TABLE agents (
    name                   text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    max_concurrent_tasks   integer CHECK (max_concurrent_tasks > 0),
    max_tpm                bigint CHECK (max_tpm > 0),
    lease_seconds          integer NOT NULL DEFAULT 60 CHECK (lease_seconds > 0),
    starvation_seconds     integer NOT NULL DEFAULT 120 CHECK (starvation_seconds >= 0),
    executor               text NOT NULL DEFAULT 'local',
    model                  text,
    price_input_per_mtok   numeric(12, 6) NOT NULL DEFAULT 0,
    price_output_per_mtok  numeric(12, 6) NOT NULL DEFAULT 0,
    settings               jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tasks (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent               text NOT NULL REFERENCES agents (name),
    customer            text,
    priority            smallint NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 9),
    status              task_status NOT NULL DEFAULT 'enqueued',
    document_uri        text NOT NULL CHECK (document_uri <> ''),
    document_name       text,
    document_sha256     text CHECK (document_sha256 ~ '^[0-9a-f]{64}$'),
    document_bytes      bigint CHECK (document_bytes >= 0),
    pages               integer CHECK (pages >= 0),
    estimated_tokens    integer NOT NULL CHECK (estimated_tokens > 0),
    attempt_count       integer NOT NULL DEFAULT 0,  -- attempts ever started (numbers them)
    attempt_base        integer NOT NULL DEFAULT 0,  -- attempts spent before the latest retry
    max_attempts        integer NOT NULL DEFAULT 3 CHECK (max_attempts > 0),  -- budget per run
    run_after           timestamptz NOT NULL DEFAULT now(),
    waiting_since       timestamptz,          -- first refused admission for lack of token budget
    locked_by           text,
    lease_expires_at    timestamptz,
    current_attempt_id  bigint,
    parent_id           bigint REFERENCES tasks (id),
    result              jsonb,
    confidence          real CHECK (confidence BETWEEN 0 AND 1),
    error               text,
    submitted_by        text,
    cancelled_by        text,
    retried_by          text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz
);

-- The claim walks this index in claim order: O(log n) to the first candidate at any depth.
CREATE INDEX tasks_claim_idx ON tasks (agent, priority DESC, created_at, id)
    WHERE status = 'enqueued';
-- Counting in-flight work per agent and finding expired leases read only processing rows.
CREATE INDEX tasks_processing_idx ON tasks (agent, lease_expires_at)
    WHERE status = 'processing';
CREATE INDEX tasks_created_idx ON tasks (created_at);
CREATE INDEX tasks_sha256_idx ON tasks (document_sha256);
CREATE INDEX tasks_parent_idx ON tasks (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE task_attempts (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id            bigint NOT NULL REFERENCES tasks (id),
    attempt_no         integer NOT NULL,
    agent              text NOT NULL,
    worker_id          text NOT NULL,
    executor           text,
    status             attempt_status NOT NULL DEFAULT 'processing',
    callback_secret    text NOT NULL,
    job_run_id         text,
    pid                integer,
    trace_id           text,
    estimated_tokens   integer NOT NULL,
    input_tokens       bigint,
    output_tokens      bigint,
    llm_cost_usd       numeric(14, 6),
    compute_cost_usd   numeric(14, 6),
    dbus               numeric(14, 6),
    compute_seconds    double precision,
    usage_recorded_at  timestamptz,         -- spend is recorded once per attempt, never twice
    reported_status    text,                -- the status this attempt last reported by callback
    callbacks_received integer NOT NULL DEFAULT 0,
    started_at         timestamptz NOT NULL,
    heartbeat_at       timestamptz,
    finished_at        timestamptz,
    error              text,
    UNIQUE (task_id, attempt_no)
);

ALTER TABLE tasks ADD CONSTRAINT tasks_current_attempt_fk
    FOREIGN KEY (current_attempt_id) REFERENCES task_attempts (id) DEFERRABLE INITIALLY DEFERRED;

-- The token window reads attempts of one agent that are processing or started recently.
CREATE INDEX task_attempts_window_idx ON task_attempts (agent, started_at);
CREATE INDEX task_attempts_processing_idx ON task_attempts (agent) WHERE status = 'processing';
CREATE INDEX task_attempts_task_idx ON task_attempts (task_id);

-- One row per task state change, written by the trigger below; ids order the SSE stream.
CREATE TABLE task_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     bigint NOT NULL,
    agent       text NOT NULL,
    status      task_status NOT NULL,
    prev_status task_status,
    actor       text,
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX task_events_task_idx ON task_events (task_id, id);

-- Exponential backoff with jitter (between half and all of base * 2^(n-1), capped), shared by
-- the sweeper and by retryable failures.
CREATE FUNCTION quire_backoff(attempt_no integer, base_seconds double precision,
                              cap_seconds double precision) RETURNS interval
LANGUAGE sql VOLATILE AS $$
    SELECT make_interval(secs => least(cap_seconds, base_seconds * power(2, greatest(attempt_no, 1) - 1))
                                 * (0.5 + random() / 2))
$$;

-- Statement-level: one INSERT into task_events and one NOTIFY per statement (chunked below the
-- 8000-byte payload limit), since every notifying transaction serialises at commit.
CREATE FUNCTION quire_notify_events(event_ids bigint[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    part record;
BEGIN
    FOR part IN
        SELECT json_agg(json_build_object('e', e.id, 'id', e.task_id, 'a', e.agent,
                                          's', e.status, 'p', e.prev_status) ORDER BY e.id) AS body
        FROM (SELECT ev.*, (row_number() OVER (ORDER BY ev.id) - 1) / 50 AS chunk
              FROM task_events ev WHERE ev.id = ANY (event_ids)) e
        GROUP BY e.chunk ORDER BY e.chunk
    LOOP
        PERFORM pg_notify('quire_tasks', part.body::text);
    END LOOP;
END $$;

CREATE FUNCTION quire_tasks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    event_ids bigint[];
BEGIN
    WITH ins AS (
        INSERT INTO task_events (task_id, agent, status, prev_status, actor)
        SELECT n.id, n.agent, n.status, NULL, nullif(current_setting('quire.actor', true), '')
        FROM new_rows n ORDER BY n.id
        RETURNING id
    )
    SELECT array_agg(id) INTO event_ids FROM ins;
    IF event_ids IS NOT NULL THEN
        PERFORM quire_notify_events(event_ids);
    END IF;
    RETURN NULL;
END $$;

-- Heartbeats and lease writes also fire this; they change no status and so notify nothing.
CREATE FUNCTION quire_tasks_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    event_ids bigint[];
BEGIN
    WITH ins AS (
        INSERT INTO task_events (task_id, agent, status, prev_status, actor)
        SELECT n.id, n.agent, n.status, o.status, nullif(current_setting('quire.actor', true), '')
        FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE o.status IS DISTINCT FROM n.status
        ORDER BY n.id
        RETURNING id
    )
    SELECT array_agg(id) INTO event_ids FROM ins;
    IF event_ids IS NOT NULL THEN
        PERFORM quire_notify_events(event_ids);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER tasks_inserted AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_tasks_inserted();

CREATE TRIGGER tasks_updated AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quire_tasks_updated();
