"""A throttled agent's token window (running, or ended in the last minute) is read from indexes:
admission, its reopening time and the waiting tasks' reasons never read the agent's whole history."""

from __future__ import annotations

import re

import pytest

from schema import queue
from schema.sql import q

HISTORY = 3000


@pytest.fixture
def history(conn):
    """A throttled agent with HISTORY attempts that ended a day ago, one that ended 10 s ago with
    300 tokens, one running with an estimate of 700, and a task waiting."""
    queue.configure_agent(conn, "tpm", max_tpm=900)
    conn.execute("INSERT INTO tasks (agent, document_uri, estimated_tokens, status, created_at, finished_at) "
                 "SELECT 'tpm', '/old/' || g || '.pdf', 1000, 'completed', now() - interval '2 days', "
                 "now() - interval '1 day' FROM generate_series(1, %s) g", [HISTORY])
    conn.execute("INSERT INTO task_attempts (task_id, attempt_no, agent, worker_id, status, started_at, finished_at, "
                 "estimated_tokens, input_tokens, output_tokens, callback_secret) "
                 "SELECT id, 1, 'tpm', 'w', 'completed', now() - interval '1 day', "
                 "now() - interval '1 day' + interval '3 seconds', 1000, 800, 200, md5(id::text) FROM tasks")
    recent = queue.enqueue(conn, agent="tpm", document_uri="/recent.pdf", estimated_tokens=400)
    running = queue.enqueue(conn, agent="tpm", document_uri="/running.pdf", estimated_tokens=700)
    conn.execute("INSERT INTO task_attempts (task_id, attempt_no, agent, worker_id, status, started_at, finished_at, "
                 "estimated_tokens, input_tokens, output_tokens, callback_secret) VALUES "
                 "(%s, 1, 'tpm', 'w', 'completed', now() - interval '20 seconds', now() - interval '10 seconds', "
                 " 400, 200, 100, 'a'), "
                 "(%s, 1, 'tpm', 'w', 'processing', now() - interval '5 seconds', NULL, 700, NULL, NULL, 'b')",
                 [recent.id, running.id])
    waiting = queue.enqueue(conn, agent="tpm", document_uri="/waiting.pdf", estimated_tokens=100)
    conn.execute("VACUUM ANALYZE task_attempts")
    conn.execute("ANALYZE tasks")
    return waiting


def _plan(conn, sql: str, params) -> str:
    return "\n".join(r["QUERY PLAN"] for r in conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + sql, params).fetchall())


def _reads_little(plan: str) -> bool:
    removed = [int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan)]
    return "Seq Scan on task_attempts" not in plan and all(n < HISTORY for n in removed)


def test_admission_reads_the_window_from_indexes(conn, history):
    row = conn.execute(q("agent_load_one"), {"agent": "tpm", "now": None}).fetchone()
    assert row["reserved_tokens"] == 300 + 700  # the recent one's usage, the running one's estimate
    plan = _plan(conn, q("agent_load_one"), {"agent": "tpm", "now": None})
    assert _reads_little(plan), plan


def test_the_reopening_time_is_read_from_indexes(conn, history):
    wait = queue.admission_reopens_in(conn, "tpm")
    assert wait is not None and 48 < wait <= 50.5  # the recent attempt leaves the window 60 s after its end
    plan = _plan(conn, q("agent_admission_reopens_one"), {"agent": "tpm", "now": None})
    assert _reads_little(plan), plan


def test_a_waiting_task_is_held_by_the_tokens_in_the_window(conn, history):
    reason = conn.execute("SELECT reason, detail FROM quire_wait_reasons(ARRAY[%s]::bigint[], now())",
                          [history.id]).fetchone()
    assert reason == {"reason": "token_budget", "detail": "1000 of 900 tokens a minute reserved"}
