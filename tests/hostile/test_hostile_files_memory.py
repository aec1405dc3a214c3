"""The app's own memory while bombs are uploaded: the checks run in a capped child, so the app
process stays within APP_GROWTH_BOUND of where it was."""

from __future__ import annotations

from bench.hostile_pdfs import deflate_bomb, huge_page, text_pdf
from tests.hostile.memory import MB, peak, reset_peak

# The app's peak resident memory may grow this much while it checks the bombs below. Before the
# checks ran in a child, one 100 MB deflate bomb took the app from 442 MB to 1,571 MB.
APP_GROWTH_BOUND = 100 * MB


def test_bombs_are_refused_and_the_app_stays_within_its_memory_bound(app_server):
    server, _conn = app_server
    files = [("files", (name, data, "application/pdf")) for name, data in (
        ("bomb-1.pdf", deflate_bomb(100)), ("bomb-2.pdf", deflate_bomb(150)), ("huge.pdf", huge_page(200)),
        ("fine.pdf", text_pdf()))]
    with server.operator() as http:
        http.get("/api/tasks")  # warm: the first request of a process allocates what every request reuses
        before = reset_peak(server.process.pid)
        answer = http.post("/api/tasks", files=files, timeout=120)
        grown = peak(server.process.pid) - before
    assert grown < APP_GROWTH_BOUND, f"the app grew by {grown / MB:.0f} MB checking the bombs"
    body = answer.json()
    assert answer.status_code == 207, body
    outcome = {f["file"]: f for f in body["files"]}
    for name in ("bomb-1.pdf", "bomb-2.pdf"):
        assert outcome[name]["outcome"] == "rejected" and "inflate to over" in outcome[name]["error"]
    assert "page limit" in outcome["huge.pdf"]["error"]
    assert outcome["fine.pdf"]["outcome"] == "created"
