"""Lakebase OAuth: tokens minted through the real SDK client from a local fake of the REST API,
cached, refreshed, and used as the password of every new connection."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from databricks.sdk import WorkspaceClient

from schema import db
from schema.lakebase import LakebaseCredentials, dsn_from_environment


class FakeDatabricks(BaseHTTPRequestHandler):
    requests: list = []
    expiry = "2099-01-01T00:00:00Z"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, body, self.headers.get("Authorization")))
        if self.path != "/api/2.0/database/credentials":
            self.send_error(404)
            return
        reply = json.dumps({"token": f"tok-{len(self.requests)}", "expiration_time": type(self).expiry}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def do_GET(self):
        # Two instances, paged as the real list is; only the second serves the app's database.
        page = "second" if "page_token=p2" in self.path else "first"
        if not self.path.startswith("/api/2.0/database/instances"):
            self.send_error(404)
            return
        type(self).requests.append((self.path, None, self.headers.get("Authorization")))
        answer = ({"database_instances": [{"name": "quire-prod", "read_write_dns": "prod.database.example"}],
                   "next_page_token": "p2"} if page == "first" else
                  {"database_instances": [{"name": "quire-dev", "read_write_dns": "dev.database.example",
                                           "read_only_dns": "ro-dev.database.example"}]})
        reply = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_workspace():
    FakeDatabricks.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeDatabricks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield WorkspaceClient(host=f"http://127.0.0.1:{server.server_port}", token="pat-for-tests")
    server.shutdown()


def test_tokens_are_minted_once_and_cached_until_near_expiry(fake_workspace):
    creds = LakebaseCredentials("quire-db", workspace_client=fake_workspace, user="app-sp")
    assert creds() == {"user": "app-sp", "password": "tok-1"}
    assert creds()["password"] == "tok-1"
    path, body, auth = FakeDatabricks.requests[0]
    assert body["instance_names"] == ["quire-db"] and body["request_id"]
    assert auth == "Bearer pat-for-tests"
    FakeDatabricks.expiry = "2000-01-01T00:00:00Z"  # the next token is already stale
    creds._expires_at = 0
    assert creds()["password"] == "tok-2"
    assert creds()["password"] == "tok-3"
    assert creds.minted == 3
    FakeDatabricks.expiry = "2099-01-01T00:00:00Z"


def test_every_new_connection_carries_a_token(fake_workspace, db_dsn):
    creds = LakebaseCredentials("quire-db", workspace_client=fake_workspace, user="postgres")
    db.set_credential_provider(creds)
    try:
        with db.connect(db_dsn) as conn:
            assert conn.info.password == "tok-1"
            assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
        pool = db.make_pool(db_dsn, min_size=1, max_size=2)
        with pool.connection() as conn:
            assert conn.info.password == "tok-1"
        pool.close()
    finally:
        db.set_credential_provider(None)


def test_dsn_from_the_app_database_resource():
    dsn = dsn_from_environment({"PGHOST": "instance.database.example", "PGDATABASE": "quire"})
    assert "host=instance.database.example" in dsn and "sslmode=require" in dsn and "dbname=quire" in dsn
    with pytest.raises(ValueError, match="PGHOST"):
        dsn_from_environment({"PGDATABASE": "quire"})


def test_the_instance_is_found_by_the_host_the_app_resource_gives(fake_workspace):
    creds = LakebaseCredentials(host="dev.database.example", workspace_client=fake_workspace, user="sp")
    assert creds()["password"] == "tok-3"  # two list pages, then the credential
    assert FakeDatabricks.requests[-1][1]["instance_names"] == ["quire-dev"]
    unknown = LakebaseCredentials(host="other.database.example", workspace_client=fake_workspace, user="sp")
    with pytest.raises(RuntimeError, match="other.database.example"):
        unknown()
