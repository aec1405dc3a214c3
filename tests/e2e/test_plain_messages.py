"""What the API answers a person who sent something it cannot take: one sentence in plain words,
never a validator's list, a field's code name or a raw state."""

from __future__ import annotations

import re

from schema import queue
from tests.e2e.app_harness import make_pdf

SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")


def _refused(response, status: int = 422) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str), detail
    assert not SNAKE.search(detail), detail
    return detail


def test_refusals_read_as_sentences(app_server):
    server, conn = app_server
    queue.configure_agent(conn, "words-agent")
    with server.operator() as http:
        detail = _refused(http.put("/api/customers/Acme/budget", json={"monthly_llm_budget_usd": 5_000_000_000}))
        assert detail.startswith("The monthly LLM budget must be between $0 and $1,000,000,000")
        assert _refused(http.put("/api/customers/Acme/budget", json={})) == "The monthly LLM budget is required."
        assert _refused(http.get("/api/tasks", params={"limit": 0})) == "The limit must be at least 1."
        assert _refused(http.post("/api/positions", json={"task_ids": []})) == \
            "The task ids must have at least 1 item."
        assert _refused(http.post("/api/positions", json=[1])) == "The request body must be a JSON object."
        assert _refused(http.post("/api/agents/nobody/resume"), 404) == "There is no agent named 'nobody'"
        detail = _refused(http.post("/api/tasks", data={"priority": "12"},
                                    files=[("files", ("words.pdf", make_pdf("words"), "application/pdf"))]))
        assert detail.startswith("The priority must be a whole number from 0 to 9")
        # A filter's unknown status names the ones there are, held among them.
        detail = _refused(http.get("/api/tasks", params={"status": "paused"}))
        assert "held" in detail
