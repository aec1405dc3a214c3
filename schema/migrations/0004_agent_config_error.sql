-- Why an agent cannot run as configured (unknown executor, no job id, no model), as the last
-- process that applied or checked the configuration found it; NULL when it can run. The claim
-- skips an agent while this is set: its tasks wait instead of failing attempt after attempt.
ALTER TABLE agents ADD COLUMN config_error text;
