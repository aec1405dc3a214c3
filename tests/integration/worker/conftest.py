"""Fixtures shared by the worker's integration tests."""

from __future__ import annotations

import pytest

from schema import db


@pytest.fixture
def pool(db_dsn):
    p = db.make_pool(db_dsn, max_size=4)
    yield p
    p.close()
