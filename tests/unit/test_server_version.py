"""The oldest server the schema runs on is refused clearly, before anything is written to it."""

import pytest

from schema.migrate import MIN_SERVER_VERSION, UnsupportedServer, require_supported, version_text


def test_version_numbers_read_as_postgresql_names_them():
    assert version_text(150020) == "15.20"
    assert version_text(180006) == "18.6"
    assert version_text(140011) == "14.11"
    assert version_text(90624) == "9.6.24"


def test_a_server_older_than_15_is_refused_naming_both_versions():
    with pytest.raises(UnsupportedServer, match=r"needs PostgreSQL 15 or later; this server runs 14\.11"):
        require_supported(140011)


@pytest.mark.parametrize("version", [MIN_SERVER_VERSION, 150020, 160014, 170010, 180006])
def test_15_and_later_are_accepted(version):
    require_supported(version)
