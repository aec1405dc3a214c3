"""Deployment helpers behind `quire requirements` and `quire grants`."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
REQUIREMENTS = ROOT / "requirements.txt"
HEADER = ("# Generated from pyproject.toml by `quire requirements --write`: the Databricks Apps build\n"
          "# installs these (the base dependencies and the app and tracing extras, no embedded Postgres,\n"
          "# no full MLflow); a test keeps the two in sync. Edit pyproject.toml, not this file.\n")


# What the Databricks App installs: the base (the agent's needs), the web app, and MLflow's tracing
# package; never the `local` extra (embedded Postgres, full MLflow, OCR).
APP_EXTRAS = ("app", "tracing")
# What each Lakeflow job run installs beside the wheel (databricks.yml's job environment).
JOB_EXTRAS = ("tracing",)


def extras_dependencies(extras: tuple[str, ...], pyproject: Path = PYPROJECT) -> list[str]:
    """The requirements of these extras, in pyproject order, self-references (quire[x]) expanded."""
    optional = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    out: list[str] = []
    for extra in extras:
        for requirement in optional[extra]:
            if requirement.startswith("quire["):
                nested = tuple(e.strip() for e in requirement[len("quire["):-1].split(","))
                out += [r for r in extras_dependencies(nested, pyproject) if r not in out]
            elif requirement not in out:
                out.append(requirement)
    return out


def requirements_text(pyproject: Path = PYPROJECT) -> str:
    """requirements.txt for the Apps build: the base dependencies and the app's extras, in pyproject order."""
    project = tomllib.loads(pyproject.read_text())["project"]
    listed = list(project["dependencies"]) + extras_dependencies(APP_EXTRAS, pyproject)
    return HEADER + "".join(f"{dependency}\n" for dependency in listed)


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
