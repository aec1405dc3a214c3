"""`python -m agents run` end to end in a subprocess: outputs, exit codes, callbacks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.callback import derive_attempt_secret
from tests.unit.agents import agents_samples as samples
from tests.unit.agents.agents_fakes import CallbackServer, FakeChatServer, completion

ROOT = Path(__file__).resolve().parents[3]


def run_agent(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("QUIRE_", "MLFLOW_", "DATABRICKS_"))}
    clean["PYTHONPATH"] = str(ROOT)
    clean.update(env or {})
    return subprocess.run([sys.executable, "-m", "agents", "run", *args], cwd=ROOT, env=clean,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def invoice(tmp_path: Path) -> Path:
    return samples.write(tmp_path, "fattura.pdf", samples.invoice_it()[0])


def test_the_agents_prices_on_the_command_line_price_its_tokens(invoice: Path) -> None:
    proc = run_agent("--document", str(invoice), "--model", "m", "--price-input-per-mtok", "2",
                     "--price-output-per-mtok", "8", env={"QUIRE_LLM_PRICE_INPUT_PER_MTOK": "99"})
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    expected = payload["input_tokens"] * 2 / 1e6 + payload["output_tokens"] * 8 / 1e6
    assert payload["llm_cost_usd"] == pytest.approx(expected) and expected > 0
    # An empty price (a job parameter for an agent without one) leaves the tokens unpriced.
    proc = run_agent("--document", str(invoice), "--price-input-per-mtok", "", "--price-output-per-mtok", "",
                     env={"QUIRE_LLM_PRICE_INPUT_PER_MTOK": "99"})
    assert json.loads(proc.stdout)["llm_cost_usd"] is None


def test_prints_the_payload_and_writes_out_file(invoice: Path, tmp_path: Path) -> None:
    out = tmp_path / "payload.json"
    proc = run_agent("--document", str(invoice), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload == json.loads(out.read_text())
    assert payload["status"] == "completed" and payload["error"] is None
    assert payload["retryable"] is False
    assert payload["pages"] == 1 and payload["trace_id"] is None
    assert payload["compute_cost_usd"] is None and payload["run_id"] is None
    assert payload["input_tokens"] > 0 and payload["output_tokens"] > 0
    # No price configured: the tokens are unpriced, never $0.
    assert payload["llm_cost_usd"] is None
    result = payload["result"]
    assert result["document_type"] == "invoice" and result["extractor"] == "offline"
    total = result["fields"]["total"]
    assert total["value"] == 1464.0 and total["confidence"] >= 0.9
    assert total["stage"] == "rules" and total["evidence"]["page"] == 1
    assert total["evidence"]["text"].startswith("1.464,00")
    assert 0 < payload["confidence"] <= 1


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [("locked.pdf", samples.encrypted_pdf(), "password-protected"),
     ("empty.pdf", b"", "empty"),
     ("notes.pdf", samples.text_as_pdf(), "plain text"),
     ("broken.pdf", samples.corrupt_pdf(), "corrupt")],
)
def test_document_errors_exit_2_and_are_not_retryable(tmp_path, name, data, message) -> None:
    path = samples.write(tmp_path, name, data)
    proc = run_agent("--document", str(path))
    assert proc.returncode == 2, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["status"] == "failed" and payload["retryable"] is False
    assert message in payload["error"] and payload["result"] is None


def test_unexpected_errors_exit_1_and_are_retryable(invoice: Path, tmp_path: Path) -> None:
    proc = run_agent("--document", str(invoice), "--extractor", "llm")
    assert proc.returncode == 1
    payload = json.loads(proc.stdout)
    assert payload["status"] == "failed" and payload["retryable"] is True
    assert "QUIRE_LLM_MODEL" in payload["error"] and payload["pages"] == 1
    missing = run_agent("--document", str(tmp_path / "nowhere.pdf"))
    assert missing.returncode == 1 and json.loads(missing.stdout)["retryable"] is True


def test_signed_callback_and_heartbeats_with_a_derived_secret(invoice: Path) -> None:
    secret = derive_attempt_secret("shared-key", 5)
    with CallbackServer(secret) as server:
        proc = run_agent("--document", str(invoice), "--attempt-id", "5",
                         "--callback-url", server.url + "/api/callbacks/5",
                         "--heartbeat-url", server.url + "/api/heartbeats/5",
                         env={"QUIRE_CALLBACK_KEY": "shared-key", "QUIRE_HEARTBEAT_SECONDS": "0.05"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    [callback] = server.posts("/api/callbacks/5")
    assert callback["signature_valid"]
    assert callback["body"]["status"] == "completed"
    assert callback["body"]["result"]["fields"]["invoice_number"]["value"] == "FT-2024/0042"
    beats = server.posts("/api/heartbeats/5")
    assert beats and all(b["signature_valid"] and b["body"] == {} for b in beats)


def test_failed_document_is_reported_through_the_callback(tmp_path: Path) -> None:
    path = samples.write(tmp_path, "locked.pdf", samples.encrypted_pdf())
    with CallbackServer("s3cret") as server:
        proc = run_agent("--document", str(path), "--callback-url", server.url + "/cb",
                         env={"QUIRE_CALLBACK_SECRET": "s3cret"})
    assert proc.returncode == 2
    [callback] = server.received
    assert callback["signature_valid"]
    assert callback["body"]["status"] == "failed" and callback["body"]["retryable"] is False


def test_rejected_callback_and_missing_secret_exit_1(invoice: Path) -> None:
    with CallbackServer("s3cret", statuses=[410]) as server:
        proc = run_agent("--document", str(invoice), "--callback-url", server.url + "/cb",
                         env={"QUIRE_CALLBACK_SECRET": "s3cret"})
    assert proc.returncode == 1 and "410" in proc.stderr
    assert len(server.received) == 1
    proc = run_agent("--document", str(invoice), "--callback-url", "http://127.0.0.1:9/cb")
    assert proc.returncode == 1 and "no callback secret" in proc.stderr


def test_llm_extractor_through_the_command_line(invoice: Path) -> None:
    answer = {"document_type": "invoice",
              "fields": {"total": {"value": 1464.0, "confidence": 0.9},
                         "currency": {"value": "EUR", "confidence": 0.9}}}
    with FakeChatServer([(200, completion(json.dumps(answer), 1500, 60))]) as server:
        proc = run_agent("--document", str(invoice), "--extractor", "llm",
                         env={"QUIRE_LLM_BASE_URL": server.url, "QUIRE_LLM_MODEL": "fake-model",
                              "QUIRE_LLM_PRICE_INPUT_PER_MTOK": "1",
                              "QUIRE_LLM_PRICE_OUTPUT_PER_MTOK": "2"})
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["result"]["model"] == "fake-model"
    assert payload["result"]["fields"]["total"]["value"] == 1464.0
    assert payload["result"]["fields"]["issuer"] == {"value": None, "confidence": 0.0}
    assert (payload["input_tokens"], payload["output_tokens"]) == (1500, 60)
    assert payload["llm_cost_usd"] == pytest.approx(1500 / 1e6 + 120 / 1e6)
