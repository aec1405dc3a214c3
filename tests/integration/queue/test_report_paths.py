"""The two ways an agent's report is applied write the same rows: the callback endpoint's path
(queue.apply_callback, one report at a time) and the worker's (settlement.settle_ended for a batch
of ended runs, then apply_callback for what it leaves due). The same reports go both ways on two
identical databases, and every row written is compared."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import psycopg

from schema import db, queue, settlement
from tests.factories import make_agent, make_task

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

USAGE = {"input_tokens": 1800, "output_tokens": 240, "llm_cost_usd": 0.0123, "compute_cost_usd": 0.004,
         "run_id": "run-7", "trace_id": "tr-7", "pages": 3}


@contextmanager
def _database(server_dsn: str, template: str):
    name = f"quire_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        with db.connect(db.with_database(server_dsn, name)) as conn:
            yield conn
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _scene(conn) -> list[list[tuple[int, dict]]]:
    """Agents, tasks and claims at fixed times; returns the rounds of (attempt id, report) to apply.
    Both databases get the same ids, since each starts from the same template."""
    conn.execute("SELECT setseed(0.25)")  # the backoff's jitter draws the same numbers on both
    make_agent(conn, "docs", now=T0)
    make_agent(conn, "slow", now=T0)
    make_agent(conn, "llm", max_tpm=50_000, now=T0)
    make_agent(conn, "refused", now=T0)
    agent_of = {"limited": "llm", "stale_fail": "slow", "stale_win": "slow", "cannot_run": "refused"}
    budget = {"retryable": 2, "spent": 1}
    t = {name: make_task(conn, agent_of.get(name, "docs"), customer="acme", now=T0,
                         document_uri=f"file:///docs/{name}.pdf", document_name=f"{name}.pdf",
                         max_attempts=budget.get(name, 3))
         for name in ("done", "bare", "retryable", "spent", "final", "replayed", "stale_fail", "stale_win",
                      "limited", "cancelled", "cannot_run")}
    # The stale tasks' first attempts lose their lease and are swept; second attempts take over.
    stale = {c.task.id: c.attempt_id for c in queue.claim(conn, agent="slow", worker_id="w1", limit=5, now=T0)}
    queue.sweep(conn, now=T0 + timedelta(minutes=10))
    later = T0 + timedelta(minutes=15)
    second = {c.task.id: c.attempt_id for c in queue.claim(conn, agent="slow", worker_id="w2", limit=5, now=later)}
    first = {c.task.id: c.attempt_id for c in queue.claim(conn, agent="docs", worker_id="w", limit=20, now=later)}
    first |= {c.task.id: c.attempt_id for c in queue.claim(conn, agent="llm", worker_id="w", limit=5, now=later)}
    first |= {c.task.id: c.attempt_id for c in queue.claim(conn, agent="refused", worker_id="w", limit=5, now=later)}
    a = {name: (first | stale)[task.id] for name, task in t.items()}
    assert len(second) == 2 and len(first) == 9
    # An operator cancels a running task; its run still reports what it spent.
    queue.cancel(conn, t["cancelled"].id, actor="ops", now=later)
    done = {"status": "completed", "result": {"fields": {"total": "12.00"}}, "confidence": 0.91, **USAGE}
    # One completion with tokens per agent and round: each settling statement decays what an agent
    # learned once (migration 0016), so a batch of two counts as one step, by design.
    return [
        [(a["done"], done),
         (a["bare"], {"status": "completed", "result": {"fields": {}}}),
         (a["retryable"], {"status": "failed", "error": "timeout", "retryable": True, **USAGE}),
         (a["spent"], {"status": "failed", "error": "timeout", "retryable": True}),
         (a["final"], {"status": "failed", "error": "not a PDF", "retryable": False}),
         (a["cancelled"], {**done, "confidence": 0.7}),
         (a["cannot_run"], {"status": "failed", "error": "HTTP 401", "retryable": True,
                            "agent_cannot_run": True}),
         (a["stale_fail"], {"status": "failed", "error": "late", "retryable": True}),
         (a["stale_win"], {**done, "confidence": 0.5}),
         (a["limited"], {**done, "rate_limited": 2, "retry_after_seconds": 30, "rate_limit_tpm": 20_000,
                         "rate_limited_at": T0.timestamp() + 60})],
        # A replay; the superseded current attempt of a task a stale one completed, with its spend.
        [(a["replayed"], done), (a["done"], done),
         (second[t["stale_win"].id], {"status": "failed", "error": "x", **USAGE})],
        [(a["replayed"], done), (a["replayed"], {"status": "failed", "error": "after the fact"})],
    ]


def _by_callback(conn, rounds, now) -> None:
    conn.execute("SELECT setseed(0.5)")
    for batch in rounds:
        for attempt_id, report in batch:
            queue.apply_callback(conn, attempt_id, report, now=now)


def _by_settlement(conn, rounds, now) -> None:
    """The worker's way: a run's report settled in a batch when the run ends (the ones it leaves
    due applied one by one, and a cancelled run's report, as the worker applies it when it saw the
    cancel); a later delivery of the same attempt's report comes by callback."""
    conn.execute("SELECT setseed(0.5)")
    cancelled = {r["id"] for r in conn.execute("SELECT id FROM task_attempts WHERE status = 'cancelled'")}
    delivered: set[int] = set()
    for batch in rounds:
        pending = []
        for attempt_id, report in batch:
            if attempt_id in delivered:
                queue.apply_callback(conn, attempt_id, report, now=now)
            else:
                delivered.add(attempt_id)
                pending.append(settlement.Ended(attempt_id, report=report))
        while pending:
            settled = settlement.settle_ended(conn, pending, now=now)
            for e in pending:
                done = settled.get(e.attempt_id)
                if done is not None and (done.report_due or (e.attempt_id in cancelled and not done.reported_status)):
                    queue.apply_callback(conn, e.attempt_id, e.report, now=now)
            pending = [e for e in pending if e.attempt_id not in settled]


_TABLES = {
    "tasks": "SELECT * FROM tasks ORDER BY id",
    "task_attempts": "SELECT * FROM task_attempts ORDER BY id",
    "task_events": "SELECT task_id, status, prev_status, actor FROM task_events ORDER BY task_id, id",
    "agents": "SELECT * FROM agents ORDER BY name",
    "agent_token_rates": "SELECT * FROM agent_token_rates ORDER BY 1",
    "customer_month_spend": "SELECT * FROM customer_month_spend ORDER BY 1, 2",
}
# Differs between the databases by construction: each claim draws its attempts' secrets afresh,
# and configuring an agent stamps it with the server's clock.
_UNEQUAL = {"task_attempts": {"callback_secret"}, "agents": {"created_at", "updated_at"}}


def _rows(conn) -> dict[str, list[dict]]:
    return {table: [{k: v for k, v in row.items() if k not in _UNEQUAL.get(table, ())} for row in conn.execute(query)]
            for table, query in _TABLES.items()}


def _differences(a: dict[str, list[dict]], b: dict[str, list[dict]]) -> list[str]:
    """Each differing value as `table row-number column: one != other`, for a readable failure."""
    out = []
    for table in _TABLES:
        if len(a[table]) != len(b[table]):
            out.append(f"{table}: {len(a[table])} rows != {len(b[table])} rows")
            continue
        for n, (x, y) in enumerate(zip(a[table], b[table])):
            out += [f"{table} {n} {k}: {x[k]!r} != {y.get(k)!r}" for k in x if x[k] != y.get(k)]
    return out


def test_the_callback_and_the_batched_settlement_write_the_same_rows(pg_server_dsn, template_db):
    now = T0 + timedelta(minutes=16)
    with _database(pg_server_dsn, template_db) as one, _database(pg_server_dsn, template_db) as other:
        rounds = _scene(one)
        assert _scene(other) == rounds
        assert _differences(_rows(one), _rows(other)) == []  # two identical databases
        _by_callback(one, rounds, now)
        _by_settlement(other, rounds, now)
        by_callback, by_settlement = _rows(one), _rows(other)
    # The reports did something: completions, retries, final failures, a rate limit learned, a halt,
    # a cancelled task's spend kept on its attempt.
    status = {r["document_name"].removesuffix(".pdf"): r["status"] for r in by_callback["tasks"]}
    assert status == {"done": "completed", "bare": "completed", "retryable": "enqueued", "spent": "failed",
                      "final": "failed", "replayed": "completed", "stale_fail": "processing",
                      "stale_win": "completed", "limited": "completed", "cancelled": "cancelled",
                      "cannot_run": "failed"}
    assert any(r["rate_limited_total"] for r in by_callback["agents"])
    assert [r["name"] for r in by_callback["agents"] if r["halt_reason"]] == ["refused"]
    assert any(r["samples"] for r in by_callback["agent_token_rates"])
    attempts = {r["id"]: r for r in by_callback["task_attempts"]}
    kept = [r for r in attempts.values() if r["status"] == "cancelled"]
    assert len(kept) == 1 and kept[0]["input_tokens"] == USAGE["input_tokens"] and kept[0]["reported_status"] == "completed"
    replayed = next(r for r in by_callback["tasks"] if r["document_name"] == "replayed.pdf")
    assert attempts[replayed["current_attempt_id"]]["callbacks_received"] == 3  # every delivery counted
    assert _differences(by_callback, by_settlement) == []
