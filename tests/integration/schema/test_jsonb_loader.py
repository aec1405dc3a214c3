"""jsonb comes back as the same Python values json.loads makes of Postgres's text, through the
process's own loader, on every kind of connection the project opens."""

from __future__ import annotations

import json

import psycopg
import pytest

from schema import db

VALUES = [
    "{}", "[]", "null", "true", "0", "-12", "3.25", "1e-7", "12345678901234567890123456789",
    '"plain"', '""', '"caf\\u00e9 \\u65e5\\u672c \\ud83d\\ude00"', '"tab\\tnew\\nline \\"quoted\\" back\\\\slash"',
    '{"a": [1, 2.5, null, "x"], "b": {"c": true, "d": []}, "e": {}}',
    '[{"value": "DE89 3704 0044 0532 0130 00", "confidence": 0.93, "evidence": {"page": 1, "box": [1, 2, 3, 4]}}]',
    '{"deep": ' + "[" * 40 + "]" * 40 + "}",
]


@pytest.mark.parametrize("text", VALUES)
def test_a_jsonb_value_reads_as_json_loads_reads_its_text(conn, text):
    row = conn.execute("SELECT %s::jsonb AS value, %s::jsonb::text AS text", [text, text]).fetchone()
    expected = json.loads(row["text"])
    assert row["value"] == expected
    assert type(row["value"]) is type(expected)
    if isinstance(expected, float):  # not merely equal: the same float
        assert row["value"].hex() == expected.hex()


def test_the_values_are_new_objects_each_time(conn):
    first, second = conn.execute("SELECT '{}'::jsonb AS a, '{}'::jsonb AS b").fetchone().values()
    first["changed"] = True
    assert second == {}
    assert conn.execute("SELECT '[]'::jsonb AS a").fetchone()["a"] == []


def test_a_null_stays_none_and_a_task_row_reads_whole(conn):
    row = conn.execute("SELECT NULL::jsonb AS value").fetchone()
    assert row["value"] is None
    conn.execute("INSERT INTO agents (name) VALUES ('a')")
    conn.execute("INSERT INTO tasks (agent, document_uri, estimated_tokens, run_overrides, edits) "
                 """VALUES ('a', '/x.pdf', 100, '{"model": "m"}', '[{"by": "ann", "changes": {}}]')""")
    task = conn.execute("SELECT run_overrides, edits, result FROM tasks").fetchone()
    assert task == {"run_overrides": {"model": "m"}, "edits": [{"by": "ann", "changes": {}}], "result": None}


def test_pooled_connections_read_jsonb_through_the_same_loader(db_dsn):
    pool = db.make_pool(db_dsn, min_size=1, max_size=1)
    try:
        with pool.connection() as conn:
            loader = conn.adapters.get_loader(psycopg.postgres.types["jsonb"].oid, psycopg.pq.Format.TEXT)
            assert loader is db.JsonbLoader
            assert conn.execute("""SELECT '{"k": [1, "v"]}'::jsonb AS j""").fetchone()["j"] == {"k": [1, "v"]}
    finally:
        pool.close()


@pytest.mark.parametrize("data", [b'{"a": 1} x', b"[1, 2", b"{'a': 1}"])
def test_what_is_not_one_json_value_raises_as_json_loads_does(data):
    loader = db.JsonbLoader(psycopg.postgres.types["jsonb"].oid)
    with pytest.raises(json.JSONDecodeError):
        loader.load(data)


def test_surrounding_whitespace_is_read_as_json_loads_reads_it():
    loader = db.JsonbLoader(psycopg.postgres.types["jsonb"].oid)
    assert loader.load(b' {"a": 1}\n') == {"a": 1}
    assert loader.load(memoryview(b"[]")) == []
