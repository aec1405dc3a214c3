"""Lakebase OAuth: tokens minted through the real SDK client from a local fake of the REST API,
cached, refreshed, and used as the password of every new connection."""

from typing import ClassVar

import pytest
from databricks.sdk import WorkspaceClient

from bench.fake_http import FakeHttpServer, Request
from schema import db
from schema.lakebase import LakebaseCredentials, dsn_from_environment


class FakeDatabricks:
    """The credentials and instances endpoints of the REST API; records every request."""

    requests: ClassVar[list] = []
    expiry = "2099-01-01T00:00:00Z"

    @classmethod
    def answer(cls, request: Request):
        if request.method == "POST":
            cls.requests.append((request.path, request.json(), request.headers.get("Authorization")))
            if request.path != "/api/2.0/database/credentials":
                return 404, {"error_code": "NOT_FOUND"}
            return 200, {"token": f"tok-{len(cls.requests)}", "expiration_time": cls.expiry}
        if not request.path.startswith("/api/2.0/database/instances"):
            return 404, {"error_code": "NOT_FOUND"}
        cls.requests.append((request.path, None, request.headers.get("Authorization")))
        # Two instances, paged as the real list is; only the second serves the app's database.
        if "page_token=p2" not in request.path:
            return 200, {"database_instances": [{"name": "quire-prod", "read_write_dns": "prod.database.example"}],
                         "next_page_token": "p2"}
        return 200, {"database_instances": [{"name": "quire-dev", "read_write_dns": "dev.database.example",
                                             "read_only_dns": "ro-dev.database.example"}]}


@pytest.fixture
def fake_workspace():
    FakeDatabricks.requests = []
    with FakeHttpServer(FakeDatabricks.answer) as server:
        yield WorkspaceClient(host=server.url, token="pat-for-tests")


def test_tokens_are_minted_once_and_cached_until_near_expiry(fake_workspace):
    creds = LakebaseCredentials("quire-db", workspace_client=fake_workspace, user="app-sp")
    assert creds() == {"user": "app-sp", "password": "tok-1"}
    assert creds()["password"] == "tok-1"
    _path, body, auth = FakeDatabricks.requests[0]
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
    with pytest.raises(RuntimeError, match=r"other\.database\.example"):
        unknown()
