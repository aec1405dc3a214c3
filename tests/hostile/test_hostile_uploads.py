"""Large authenticated uploads: spooled to disk a chunk at a time, a request limit past which
nothing is kept, and a limit on uploads at once."""

from __future__ import annotations

import socket

import pytest

from bench.hostile_pdfs import text_pdf
from schema import queue
from tests.e2e.app_harness import TOKEN, start_app
from tests.hostile.memory import MB, peak, reset_peak
from tests.waiting import wait_until

# The app's peak resident memory may grow this much while it receives 140 MB of documents in one
# request. Before uploads were spooled to disk, one request of 25 × 45 MB peaked at 1.46 GB.
APP_GROWTH_BOUND = 80 * MB


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory, QUIRE_MAX_UPLOAD_MB="20",
                                       QUIRE_MAX_REQUEST_MB="150", QUIRE_UPLOADS_AT_ONCE="1")
    queue.configure_agent(conn, "documents")
    yield server, conn
    teardown()


def _task_count(conn) -> int:
    return conn.execute("SELECT count(*) AS n FROM tasks").fetchone()["n"]


def _stored(server) -> list:
    return [p for p in (server.data_dir / "files").rglob("*") if p.is_file()]


def test_a_request_of_large_documents_is_received_within_the_memory_bound(app_server):
    server, _conn = app_server
    files = [("files", (f"large-{n}.pdf", text_pdf(f"Large {n}", pad_mb=19.5), "application/pdf")) for n in range(7)]
    with server.operator() as http:
        http.get("/api/tasks")
        before = reset_peak(server.process.pid)
        answer = http.post("/api/tasks", files=files, timeout=120)
        grown = peak(server.process.pid) - before
    assert answer.status_code == 201, answer.text
    assert answer.json()["created"] == 7
    assert grown < APP_GROWTH_BOUND, f"the app grew by {grown / MB:.0f} MB receiving 140 MB"


def _upload_head(server, length: int, *, chunked: bool = False) -> bytes:
    boundary = "hostileboundary"
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    return (f"POST /api/tasks HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n{framing}\r\n\r\n").encode()


def _part_head() -> bytes:
    return (b"--hostileboundary\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.pdf\"\r\n"
            b"Content-Type: application/pdf\r\n\r\n%PDF-1.7\n")


def _answer(sock) -> str:
    """The response, its head and then its body to the length the head declares: the body can come
    in a segment of its own, after the head was read."""
    data = b""
    sock.settimeout(30)

    def more() -> bool:
        nonlocal data
        part = sock.recv(65536)
        data += part
        return bool(part)

    while b"\r\n\r\n" not in data and more():
        pass
    head = data.partition(b"\r\n\r\n")[0]
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                   if line.lower().startswith(b"content-length:")), 0)
    while len(data) - len(head) - 4 < length and more():
        pass
    return data.decode(errors="replace")


def test_past_the_request_limit_413_and_nothing_is_kept(app_server):
    server, conn = app_server
    tasks, stored = _task_count(conn), _stored(server)
    # Declared too large: refused before a byte of the body is read.
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(_upload_head(server, 160 * MB))
        assert _answer(sock).startswith("HTTP/1.1 413")
    # Sent without a length: cut off once it passes the limit.
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(_upload_head(server, 0, chunked=True))
        first = _part_head()
        sock.sendall(f"{len(first):x}\r\n".encode() + first + b"\r\n")
        chunk = b"0" * (8 * MB)
        try:
            for _ in range(20):  # 160 MB
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = _answer(sock)
    assert answer.startswith("HTTP/1.1 413") and "at most 151,000,000 bytes" in answer
    assert _task_count(conn) == tasks and _stored(server) == stored, "a refused upload left something behind"


def test_uploads_at_once_are_limited_and_the_next_one_is_told_to_retry(app_server):
    server, _conn = app_server
    with socket.create_connection(("127.0.0.1", server.port)) as slow:
        # An upload whose body is still arriving holds the only upload slot.
        slow.sendall(_upload_head(server, 30 * MB) + _part_head() + b"0" * 1_000_000)
        with server.operator() as http:
            def second():
                answer = http.post("/api/tasks", files=[("files", ("w.pdf", text_pdf("wait"), "application/pdf"))])
                return answer if answer.status_code == 429 else None
            refused = wait_until(second, timeout=20, message="a second upload refused while the first is received")
        assert int(refused.headers["retry-after"]) > 0 and "QUIRE_UPLOADS_AT_ONCE" in refused.json()["detail"]
    # The slow client hung up: its slot is free again.
    with server.operator() as http:
        def accepted():
            answer = http.post("/api/tasks", files=[("files", ("after.pdf", text_pdf("after"), "application/pdf"))])
            return answer if answer.status_code == 201 else None
        wait_until(accepted, timeout=20, message="an upload accepted once the slow one hung up")
