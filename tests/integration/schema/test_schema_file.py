"""schema/schema.sql is what the migrations produce: a migration that changes the schema fails
this test until the file is regenerated."""

import difflib

import pytest

from schema import db
from schema.dump import REGENERATE, SCHEMA_FILE, dump
from schema.migrate import version_text


def test_schema_sql_is_what_the_migrations_produce(pg_server_dsn, template_db):
    with db.connect(pg_server_dsn) as conn:
        version = conn.info.server_version
    if version < 160000:
        # PostgreSQL 15 prints a view's columns qualified by its table (`task_attempts.id`), 16 and
        # later plain: the file is the embedded server's dump, which `python -m schema.dump` makes.
        pytest.skip(f"schema.sql is a dump of PostgreSQL 16 or later; this server runs {version_text(version)}")
    produced = dump(db.with_database(pg_server_dsn, template_db))
    stored = SCHEMA_FILE.read_text() if SCHEMA_FILE.exists() else ""
    if produced != stored:
        diff = "".join(list(difflib.unified_diff(stored.splitlines(True), produced.splitlines(True),
                                                 "schema/schema.sql", "the migrations"))[:60])
        pytest.fail(f"schema/schema.sql is not what the migrations produce: regenerate it with "
                    f"`{REGENERATE}` and commit it.\n{diff}")


def test_the_dump_leaves_out_what_varies_between_runs(pg_server_dsn, template_db):
    text = dump(db.with_database(pg_server_dsn, template_db))
    assert "CREATE TABLE public.tasks" in text and "document_chars integer" in text
    assert "Dumped from" not in text and "\\restrict" not in text
