"""Where remote jobs report: QUIRE_PUBLIC_URL, else the Databricks App's URL (env or apps API);
never a loopback address."""

from __future__ import annotations

from datetime import UTC

import pytest

from schema.models import Agent
from schema.settings import Settings
from tests.integration.worker.fake_databricks import PAT, FakeDatabricks
from worker.executors import DatabricksConfig, DatabricksExecutor, ExecutorError, Launch
from worker.executors.databricks import is_loopback_url, unreachable_reason
from worker.public_url import public_url


@pytest.fixture
def fake(monkeypatch):
    for name in ("DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET", "DATABRICKS_APP_URL", "DATABRICKS_APP_NAME",
                 "QUIRE_PUBLIC_URL"):
        monkeypatch.delenv(name, raising=False)
    with FakeDatabricks() as server:
        monkeypatch.setenv("DATABRICKS_HOST", server.host)
        monkeypatch.setenv("DATABRICKS_TOKEN", PAT)
        monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/.databrickscfg")
        server.workspace.apps["quire"] = "https://quire-424242.aws.databricksapps.com"
        yield server


def test_public_url_order(fake, monkeypatch):
    assert public_url(Settings()) is None
    monkeypatch.setenv("DATABRICKS_APP_NAME", "quire")
    assert public_url(Settings()) == "https://quire-424242.aws.databricksapps.com"
    assert "GET /api/2.0/apps/quire" in fake.jobs.paths()
    monkeypatch.setenv("DATABRICKS_APP_URL", "https://from-env.databricksapps.com/")
    assert public_url(Settings()) == "https://from-env.databricksapps.com"
    assert public_url(Settings(public_url="https://quire.example.com/")) == "https://quire.example.com"


def test_an_unknown_app_gives_no_url(fake, monkeypatch):
    monkeypatch.setenv("DATABRICKS_APP_NAME", "not-deployed")
    assert public_url(Settings()) is None


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:80",
                                 "http://0.0.0.0:8080", "http://127.0.1.1", None, ""])
def test_loopback_or_missing_urls_are_refused(url):
    assert unreachable_reason(url, DatabricksConfig()) is not None
    if url:
        assert is_loopback_url(url)


def test_the_jobs_executor_refuses_to_send_a_loopback_url(fake):
    from datetime import datetime

    now = datetime.now(UTC)
    agent = Agent(name="remote", max_concurrent_tasks=None, max_tpm=None, lease_seconds=60, starvation_seconds=0,
                  executor="databricks", model=None, price_input_per_mtok=None, price_output_per_mtok=None,
                  settings={"job_id": 42}, created_at=now, updated_at=now)

    class Task:
        document_uri = "/Volumes/main/quire/documents/x.pdf"

    executor = DatabricksExecutor(DatabricksConfig())
    launch = Launch(attempt_id=7, task=Task(), agent=agent, secret="s",
                    callback_url="http://127.0.0.1:8080/api/callbacks/7")
    with pytest.raises(ExecutorError, match="QUIRE_PUBLIC_URL") as refused:
        executor.start(launch, lambda: None)
    assert not refused.value.retryable
    assert not fake.jobs.runs  # nothing was triggered
    assert unreachable_reason("https://quire-424242.aws.databricksapps.com", DatabricksConfig()) is None
