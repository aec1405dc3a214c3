"""Deployment helpers behind `quire requirements` and `quire grants`."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
REQUIREMENTS = ROOT / "requirements.txt"
HEADER = ("# Generated from pyproject.toml by `quire requirements --write`: the Databricks Apps build\n"
          "# installs these; a test keeps the two in sync. Edit pyproject.toml, not this file.\n")


def requirements_text(pyproject: Path = PYPROJECT) -> str:
    """requirements.txt for the Apps build: the project's runtime dependencies, in pyproject order."""
    project = tomllib.loads(pyproject.read_text())["project"]
    return HEADER + "".join(f"{dependency}\n" for dependency in project["dependencies"])


def grants(dsn: str, principal: str, *, apply: bool, owner: str | None = None) -> list[str]:
    """The principal's role (if missing) and grants as SQL text; applied in one transaction when `apply`.

    Nothing else happens: no migration, no agent configuration.
    """
    from schema import db
    from schema.grants import apply_grants, grant_statements

    with db.connect(dsn) as conn:
        statements = grant_statements(conn, principal, owner=owner)
        text = [s.as_string(conn) + ";" for s in statements]
        if apply:
            apply_grants(conn, statements)
    return text
