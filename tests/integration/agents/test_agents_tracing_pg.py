"""Agent runs traced to MLflow stored in PostgreSQL, read back with mlflow.get_trace."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.agents import agents_samples as samples
from tests.unit.agents.agents_fakes import FakeChatServer, completion
from worker.tracking import ensure_database, tracking_uri_beside

ROOT = Path(__file__).resolve().parents[3]
DATABASE = "mlflow_agents_test"

LOAD_TRACE = """
import json, sys, mlflow
trace = mlflow.get_trace(sys.argv[1])
spans = [{"name": s.name, "type": s.span_type, "attributes": s.attributes} for s in trace.data.spans]
print(json.dumps({"state": str(trace.info.state), "token_usage": trace.info.token_usage,
                  "cost": trace.info.cost, "tags": trace.info.tags, "spans": spans}, default=str))
"""


@pytest.fixture(scope="module")
def tracking_uri(pg_server_dsn) -> str:
    """MLflow's store in a database of its own on the test server, as the worker sets it up."""
    ensure_database(pg_server_dsn, DATABASE)
    return tracking_uri_beside(pg_server_dsn, DATABASE)


def _env(tracking_uri: str, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("QUIRE_", "MLFLOW_", "DATABRICKS_"))}
    env.update({"PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": tracking_uri,
                "MLFLOW_EXPERIMENT_NAME": "quire-agents-test"})
    env.update(extra or {})
    return env


def run_agent(tracking_uri: str, *args: str, env: dict | None = None) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "agents", "run", *args], cwd=ROOT,
                          env=_env(tracking_uri, env), capture_output=True, text=True, timeout=180)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def load_trace(tracking_uri: str, trace_id: str) -> dict:
    """The trace as another process (the worker) sees it once the agent has exited."""
    proc = subprocess.run([sys.executable, "-c", LOAD_TRACE, trace_id], cwd=ROOT,
                          env=_env(tracking_uri), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_offline_run_is_traced_with_estimated_usage(tracking_uri: str, tmp_path: Path) -> None:
    path = samples.write(tmp_path, "invoice.pdf", samples.invoice_en()[0])
    code, payload = run_agent(tracking_uri, "--document", str(path), "--attempt-id", "11")
    assert code == 0 and payload["status"] == "completed"
    assert payload["trace_id"].startswith("tr-")
    trace = load_trace(tracking_uri, payload["trace_id"])
    assert trace["state"].endswith("OK")
    assert trace["token_usage"] == {
        "input_tokens": payload["input_tokens"], "output_tokens": payload["output_tokens"],
        "total_tokens": payload["input_tokens"] + payload["output_tokens"]}
    names = {s["name"]: s for s in trace["spans"]}
    assert {"quire.agent.run", "read", "classify", "extract"} <= set(names)
    assert names["quire.agent.run"]["type"] == "AGENT"
    assert names["extract"]["attributes"]["quire.tokens_estimated"] is True
    assert trace["tags"]["quire.attempt_id"] == "11"


def test_llm_run_records_each_model_call_with_usage_and_cost(tracking_uri: str, tmp_path: Path) -> None:
    answer = {"document_type": "invoice", "fields": {"total": {"value": 5912.71, "confidence": 0.9}}}
    replies = [(200, completion("not json at all", 1200, 15)),
               (200, completion(json.dumps(answer), 1300, 40))]
    path = samples.write(tmp_path, "invoice.pdf", samples.invoice_en()[0])
    with FakeChatServer(replies) as server:
        code, payload = run_agent(
            tracking_uri, "--document", str(path), "--extractor", "llm",
            env={"QUIRE_LLM_BASE_URL": server.url, "QUIRE_LLM_MODEL": "fake-model",
                 "QUIRE_LLM_PRICE_INPUT_PER_MTOK": "2", "QUIRE_LLM_PRICE_OUTPUT_PER_MTOK": "8"})
    assert code == 0, payload
    assert (payload["input_tokens"], payload["output_tokens"]) == (2500, 55)
    expected_cost = 2500 * 2 / 1e6 + 55 * 8 / 1e6
    assert payload["llm_cost_usd"] == pytest.approx(expected_cost)
    trace = load_trace(tracking_uri, payload["trace_id"])
    assert trace["token_usage"] == {"input_tokens": 2500, "output_tokens": 55, "total_tokens": 2555}
    assert trace["cost"]["total_cost"] == pytest.approx(expected_cost)
    calls = [s for s in trace["spans"] if s["type"] == "CHAT_MODEL"]
    assert len(calls) == 2
    assert [c["attributes"]["mlflow.chat.tokenUsage"]["input_tokens"] for c in calls] == [1200, 1300]
    assert all(c["attributes"]["mlflow.llm.model"] == "fake-model" for c in calls)


def test_failed_run_still_has_a_loadable_trace(tracking_uri: str, tmp_path: Path) -> None:
    path = samples.write(tmp_path, "locked.pdf", samples.encrypted_pdf())
    code, payload = run_agent(tracking_uri, "--document", str(path))
    assert code == 2 and payload["status"] == "failed" and payload["retryable"] is False
    trace = load_trace(tracking_uri, payload["trace_id"])
    assert trace["state"].endswith("ERROR")
    assert "read" in {s["name"] for s in trace["spans"]}


def test_unreachable_tracking_database_disables_tracing_quickly(tmp_path: Path) -> None:
    path = samples.write(tmp_path, "invoice.pdf", samples.invoice_it()[0])
    code, payload = run_agent("postgresql+psycopg://postgres@127.0.0.1:1/none", "--document", str(path))
    assert code == 0 and payload["status"] == "completed" and payload["trace_id"] is None
