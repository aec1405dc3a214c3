"""Tenancy: one customer's documents are never offered to another, and who may submit for which
customer, at which priority, is enforced at the API (Databricks identities)."""

from __future__ import annotations

import asyncio

import pytest

from app import auth, submitting
from schema import db, queue
from schema.settings import Settings
from tests.e2e.app_harness import make_pdf, start_app

OPERATOR = "ops@example.com"
CLERK = "clerk@example.com"      # may submit for Acme only
AGENCY = "agency@example.com"    # may submit for any customer
VIEWER = "viewer@example.com"    # listed nowhere: reads only


@pytest.fixture
def pool(db_dsn):
    with db.make_pool(db_dsn, max_size=2) as pool:
        yield pool


def _submit(pool, settings, data: bytes, customer: str | None):
    options = submitting.SubmitOptions(agent="docs", customer=customer)
    [result] = asyncio.run(submitting.submit(pool, settings, [submitting.Upload("same.pdf", data)], options,
                                             submitted_by="someone"))
    return result


def test_a_document_is_offered_as_a_duplicate_only_within_its_customer(pool, conn, tmp_path):
    queue.configure_agent(conn, "docs")
    settings = Settings(data_dir=tmp_path)
    data = make_pdf("shared contract")
    first = _submit(pool, settings, data, "Acme")
    assert first.outcome == "created"
    other = _submit(pool, settings, data, "Zeta")
    assert other.outcome == "created" and other.duplicate_of is None, "Acme's task was offered to Zeta"
    assert other.task_id != first.task_id
    none = _submit(pool, settings, data, None)
    assert none.outcome == "created" and none.duplicate_of is None
    again = _submit(pool, settings, data, "Acme")
    assert again.outcome == "duplicate" and again.duplicate_of["id"] == first.task_id
    assert "document_uri" not in again.duplicate_of  # where files are stored is not shown


def test_submit_rights_by_role_customer_and_priority(tmp_path):
    config = tmp_path / "quire.toml"
    config.write_text(f'[agents.docs]\n\n[submitters]\n"{CLERK}" = ["Acme"]\n"{AGENCY}" = ["*"]\n')
    settings = Settings(data_dir=tmp_path, config=config, submit_max_priority=5)

    def who(name, role=auth.Role.VIEWER):
        return auth.Identity(name=name, role=role, via="databricks")

    assert auth.submit_rights(who(VIEWER), settings) is None
    assert auth.submit_rights(who("Reviewer@example.com", auth.Role.REVIEWER), settings) is None
    assert auth.submit_rights(auth.ANONYMOUS, settings) is None
    clerk = auth.submit_rights(who("Clerk@Example.com"), settings)  # emails compare without case
    assert clerk.refusal(who(CLERK), "Acme", 5) is None
    assert "only for: Acme" in clerk.refusal(who(CLERK), "Zeta", 5)
    assert clerk.refusal(who(CLERK), None, 3) is not None
    assert "priority 5 at most" in clerk.refusal(who(CLERK), "Acme", 9)
    agency = auth.submit_rights(who(AGENCY), settings)
    assert agency.refusal(who(AGENCY), "Zeta", 0) is None and agency.refusal(who(AGENCY), None, 5) is None
    assert agency.refusal(who(AGENCY), "Zeta", 6) is not None
    ops = auth.submit_rights(who(OPERATOR, auth.Role.OPERATOR), settings)
    assert ops.refusal(who(OPERATOR, auth.Role.OPERATOR), "Zeta", 9) is None


@pytest.fixture(scope="module")
def databricks_app(pg_server_dsn, template_db, tmp_path_factory):
    config = tmp_path_factory.mktemp("tenancy") / "quire.toml"
    config.write_text(f'[agents.documents]\n\n[submitters]\n"{CLERK}" = ["Acme"]\n')
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory, QUIRE_CONFIG=str(config),
                                       DATABRICKS_APP_NAME="quire-hostile", QUIRE_OPERATORS=OPERATOR)
    queue.configure_agent(conn, "documents")
    yield server, conn
    teardown()


def _as(server, email):
    return server.client(**{"X-Forwarded-Email": email})


def _upload(http, name, *, customer=None, priority=None):
    form = {k: str(v) for k, v in (("customer", customer), ("priority", priority)) if v is not None}
    return http.post("/api/tasks", files=[("files", (name, make_pdf(name), "application/pdf"))], data=form)


def test_only_listed_submitters_submit_for_their_customers_at_ordinary_priority(databricks_app):
    server, conn = databricks_app
    before = conn.execute("SELECT count(*) AS n FROM tasks").fetchone()["n"]
    with _as(server, VIEWER) as http:
        refused = _upload(http, "viewer.pdf", customer="Acme")
        assert refused.status_code == 403 and "may not submit" in refused.json()["detail"]
        assert _upload(http, "viewer9.pdf", customer="Zeta", priority=9).status_code == 403
    with _as(server, CLERK) as http:
        assert _upload(http, "zeta.pdf", customer="Zeta").status_code == 403, "charged another customer"
        assert _upload(http, "urgent.pdf", customer="Acme", priority=9).status_code == 403
        assert _upload(http, "plain.pdf").status_code == 403  # no customer is not one of theirs
        created = _upload(http, "acme.pdf", customer="Acme", priority=5)
        assert created.status_code == 201, created.text
    with _as(server, OPERATOR) as http:
        assert _upload(http, "ops.pdf", customer="Zeta", priority=9).status_code == 201
    rows = conn.execute("SELECT customer, priority, submitted_by FROM tasks ORDER BY id").fetchall()[before:]
    assert [(r["customer"], r["priority"], r["submitted_by"]) for r in rows] == [("Acme", 5, CLERK), ("Zeta", 9, OPERATOR)]


def test_the_upload_page_offers_a_viewer_no_drop_zone_and_a_submitter_its_customers(databricks_app):
    server, _ = databricks_app
    with _as(server, VIEWER) as http:
        page = http.get("/").text
    assert "may not submit documents" in page and "upload-agent" not in page
    with _as(server, CLERK) as http:
        page = http.get("/").text
    assert "may not submit documents" not in page and "upload-agent" in page
