"""An applied migration whose file changed stops migrating, naming the file; nothing is applied."""

import shutil

import pytest

from schema import migrate as migrate_module
from schema.migrate import MigrationChanged, available, migrate


@pytest.fixture
def shipped_copy(tmp_path, monkeypatch):
    """The shipped migrations, copied where a test may edit them."""
    folder = tmp_path / "migrations"
    shutil.copytree(migrate_module.MIGRATIONS_DIR, folder)
    monkeypatch.setattr(migrate_module, "MIGRATIONS_DIR", folder)
    return folder


def _recorded(conn):
    return {r["version"]: r["checksum"] for r in conn.execute("SELECT version, checksum FROM schema_migrations")}


def test_every_applied_migration_is_recorded_with_the_checksum_of_its_file(conn):
    assert migrate(conn) == []
    assert _recorded(conn) == {m.version: m.checksum for m in available()}


def test_an_applied_migration_edited_later_stops_migrating_and_names_the_file(conn, shipped_copy):
    edited = sorted(shipped_copy.glob("0003_*.sql"))[0]
    edited.write_text(edited.read_text() + "\n-- a later edit\n")
    (shipped_copy / f"{len(available()) + 1:04d}_next_change.sql").write_text("CREATE TABLE next_change (id int);")
    before = _recorded(conn)

    with pytest.raises(MigrationChanged, match=edited.name):
        migrate(conn)

    # Stopped before applying anything: the new migration did not run, the records are unchanged.
    assert _recorded(conn) == before
    assert conn.execute("SELECT to_regclass('next_change') IS NULL AS absent").fetchone()["absent"]


def test_a_database_migrated_before_checksums_takes_the_files_as_they_are(conn, shipped_copy):
    conn.execute("UPDATE schema_migrations SET checksum = NULL")
    assert migrate(conn) == []
    assert _recorded(conn) == {m.version: m.checksum for m in available()}

    edited = sorted(shipped_copy.glob("0002_*.sql"))[0]
    edited.write_text(edited.read_text() + "\n-- a later edit\n")
    with pytest.raises(MigrationChanged, match=edited.name):
        migrate(conn)
