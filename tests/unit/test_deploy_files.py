"""The deployment files agree with the code: requirements.txt with pyproject.toml, the bundle with
the agent's command line and the executor's job parameters."""

from __future__ import annotations

import re
import tomllib

from agents.cli import build_parser
from app.deploy import PYPROJECT, REQUIREMENTS, ROOT, requirements_text


def test_requirements_txt_is_generated_from_pyproject():
    assert REQUIREMENTS.read_text() == requirements_text(), "run `quire requirements --write`"
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    listed = [line for line in REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#")]
    assert listed == dependencies


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
