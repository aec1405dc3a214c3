-- CPU time of an attempt, measured by its executor beside wall time (compute_seconds).
ALTER TABLE task_attempts ADD COLUMN cpu_seconds double precision;

-- The cost reconciler looks for finished attempts with a trace and no recorded spend.
CREATE INDEX task_attempts_unreconciled_idx ON task_attempts (id)
    WHERE trace_id IS NOT NULL AND usage_recorded_at IS NULL;
