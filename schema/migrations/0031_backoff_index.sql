-- When the earliest backing-off task becomes claimable: a claimer that found less work than slots
-- asks, since nothing notifies when a backoff ends. The question read every enqueued task (a
-- sequential scan: 13 ms at 100,000 of them, about 130 ms at a million, each time a round ran dry,
-- as every round of a throttled agent's backlog does). Tasks whose run_after lies past their
-- creation are the ones put back after it (a backoff, a retry, a hand-back, a released batch):
-- this index holds those while they wait, and the first of them past now is read from it. New
-- tasks, which the queue holds most of, are not in it, so an enqueue writes nothing more.
CREATE INDEX tasks_backoff_idx ON tasks (run_after) WHERE status = 'enqueued' AND run_after > created_at;
