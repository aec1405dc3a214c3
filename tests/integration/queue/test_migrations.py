"""Migrations apply to an empty database, twice without effect, and concurrently."""

import threading

from schema import db
from schema.migrate import available, migrate


def test_all_migrations_apply_to_an_empty_database_and_again_change_nothing(pg_server_dsn):
    name = "quire_migrate_empty"
    with db.connect(pg_server_dsn) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        dsn = db.with_database(pg_server_dsn, name)
        results, errors = [], []

        def run():
            try:
                with db.connect(dsn) as conn:
                    results.append(migrate(conn))
            except Exception as exc:  # collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        versions = [m.version for m in available()]
        assert sorted(results, key=len) == [[], [], versions]
        with db.connect(dsn) as conn:
            assert migrate(conn) == []
            tables = {r["table_name"] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")}
            assert {"tasks", "task_attempts", "agents", "task_events", "schema_migrations"} <= tables
            applied = [r["version"] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
            assert applied == versions
    finally:
        with db.connect(pg_server_dsn) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_claim_walks_the_fair_share_index_without_sorting_the_backlog(conn):
    from schema.sql import q
    from tests.factories import make_agent, make_task

    make_agent(conn)
    for i in range(60):
        make_task(conn, customer=f"c{i % 3}")
    conn.execute("ANALYZE tasks")
    conn.execute("SET enable_seqscan = off")
    params = {"agent": None, "worker_id": "w", "now": None, "executor": None, "lease_seconds": None,
              "executors": ["local"], "pools": ["local"], "slots": [10], "ids": None,
              "unthrottled_only": True}
    [[plan]] = conn.execute("EXPLAIN (FORMAT JSON) " + q("task_claim_batch"), params).fetchone().values()

    def walk(node, parents=()):
        yield node, parents
        for child in node.get("Plans", []):
            yield from walk(child, (node, *parents))

    nodes = list(walk(plan["Plan"]))
    assert not any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "tasks" for n, _ in nodes)
    # quire_claim_candidates is a plain SQL function: the planner inlines it into the claim.
    fair_scans = [(n, p) for n, p in nodes if n.get("Index Name") == "tasks_fair_claim_idx"]
    assert fair_scans, "the claim reads the fair-share index"
    # The backlog is never sorted: every read of the index is cut by a limit (a group's head, or
    # the next group of the skip scan), so only the bounded candidate set is ranked.
    for _, parents in fair_scans:
        assert "Limit" in [p["Node Type"] for p in parents[:3]]


def test_every_trigger_of_the_queue_tables_says_how_it_joins(conn):
    # Settlement turns nested loops off for its batch statement; the triggers it fires must say for
    # themselves, or their small lookups could become scans of whole tables.
    rows = conn.execute(
        "SELECT DISTINCT p.proname, coalesce(p.proconfig, '{}') AS config FROM pg_trigger t "
        "JOIN pg_proc p ON p.oid = t.tgfoid WHERE NOT t.tgisinternal "
        "AND t.tgrelid IN ('tasks'::regclass, 'task_attempts'::regclass, 'agents'::regclass)").fetchall()
    assert len(rows) >= 8
    assert [r["proname"] for r in rows
            if not {"enable_nestloop=on", "enable_nestloop=off"} & set(r["config"])] == []
    by_index = {r["proname"] for r in rows if "enable_nestloop=on" in r["config"]}
    assert {"quire_tasks_learn_tokens", "quire_attempts_spend_updated"} <= by_index


def test_the_rollup_fold_never_compiles_its_plans(conn):
    # Where the server has JIT, the fold's estimates pass jit_above_cost and compiling took longer
    # than folding: the function turns JIT off for its statements, whatever the session says.
    config = conn.execute("SELECT proconfig FROM pg_proc WHERE proname = 'quire_rollup_fold'").fetchone()
    assert "jit=off" in config["proconfig"]
    conn.execute("SET jit = on")
    conn.execute("SET jit_above_cost = 0")
    try:
        folded = conn.execute("SELECT quire_rollup_fold() AS folded").fetchone()["folded"]
        assert folded >= 0
        assert conn.execute("SELECT current_setting('jit') AS jit").fetchone()["jit"] == "on"
    finally:
        conn.execute("RESET jit")
        conn.execute("RESET jit_above_cost")
