-- Forecasts that know the work, and edit-and-retry.

-- A document without a text layer (a scan): its pages go through OCR, which takes far longer a
-- page than text. Forecasts and ETAs learn and use its seconds per page apart.
ALTER TABLE tasks ADD COLUMN scanned boolean NOT NULL DEFAULT false;

-- The extractor an attempt ran with (the agent's, or the task's override): seconds per page are
-- learned per agent and extractor, so a switch to another extractor starts from what it ran.
ALTER TABLE task_attempts ADD COLUMN extractor text;

-- Edit and retry: what a task's next runs use instead of its agent's settings (`extractor`,
-- `model`), and every edit with who made it and when ({at, by, changes: {field: [from, to]}}).
ALTER TABLE tasks ADD COLUMN run_overrides jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE tasks ADD COLUMN edits jsonb NOT NULL DEFAULT '[]'::jsonb;

-- A held batch an operator discarded: its queued documents were cancelled, and it no longer waits
-- for a release. Held batches are listed wherever batches are (the partial index keeps that cheap).
ALTER TABLE batches ADD COLUMN discarded_at timestamptz;
ALTER TABLE batches ADD COLUMN discarded_by text;
CREATE INDEX batches_held_idx ON batches (id) WHERE held;
