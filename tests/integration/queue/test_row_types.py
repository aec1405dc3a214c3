"""The task row is defined once: models.Task holds every column of `tasks`, and the row types
built from the same rows (stats_types.TaskRow) agree with it field for field."""

import dataclasses
import typing

from schema import models, stats_types

# Columns of `tasks` no reader is given: the per-attempt callback bookkeeping stays in the engine.
_NOT_READ: set[str] = set()
# What the task list adds to a task: its latency and the summed spend of its attempts.
_LIST_EXTRAS = {"latency_s", "input_tokens", "output_tokens", "llm_cost_usd", "compute_cost_usd"}


def _fields(cls) -> dict[str, object]:
    hints = typing.get_type_hints(cls, vars(models) | vars(stats_types))
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def test_the_task_model_holds_every_column_of_the_tasks_table(conn):
    columns = {r["column_name"] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'tasks'")}
    assert columns - _NOT_READ - set(_fields(models.Task)) == set()


def test_task_rows_of_the_list_agree_with_the_task_model():
    task, row = _fields(models.Task), _fields(stats_types.TaskRow)
    assert set(row) - set(task) == _LIST_EXTRAS
    assert {name: kind for name, kind in row.items() if name in task} == \
        {name: task[name] for name in row if name in task}


def test_the_status_enums_and_the_priority_range_mirror_the_database(conn):
    labels = [r["enumlabel"] for r in conn.execute(
        "SELECT enumlabel FROM pg_enum WHERE enumtypid = 'task_status'::regtype ORDER BY enumsortorder")]
    assert labels == [s.value for s in models.TaskStatus]
    [check] = [r["c"] for r in conn.execute(
        "SELECT pg_get_constraintdef(oid) AS c FROM pg_constraint WHERE conrelid = 'tasks'::regclass"
        " AND pg_get_constraintdef(oid) LIKE '%%priority >=%%'")]
    assert f"priority >= {models.MIN_PRIORITY}" in check and f"priority <= {models.MAX_PRIORITY}" in check


def test_the_insert_statement_takes_exactly_the_columns_the_engine_sends():
    import re

    from schema import queue
    from schema.sql import q

    [listed] = re.findall(r"INSERT INTO tasks \(([^)]*)\)", q("task_insert_batch"))
    inserted = {c.strip() for c in listed.split(",")}
    assert inserted - {"submitted_by", "retried_by", "run_after", "created_at", "updated_at"} == set(queue.BATCH_COLUMNS)
