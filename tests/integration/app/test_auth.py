"""Identity resolution: forwarded headers count only behind Databricks Apps; tokens and sessions."""

from __future__ import annotations

import os
import stat

from app.auth import SESSION_COOKIE, Authenticator, Role, load_operator_token
from schema.settings import Settings

FORGED = {"x-forwarded-email": "boss@example.com", "x-forwarded-user": "boss"}


def test_forged_forwarded_headers_grant_nothing_outside_databricks_apps(tmp_path):
    auth = Authenticator(Settings(data_dir=tmp_path, operators="boss@example.com"), databricks=False)
    who = auth.identify(FORGED, {})
    assert not who.authenticated and not who.operator


def test_forwarded_headers_behind_databricks_apps(tmp_path):
    auth = Authenticator(Settings(data_dir=tmp_path, operators="Boss@Example.com"), databricks=True)
    assert auth.identify(FORGED, {}).operator
    viewer = auth.identify({"x-forwarded-user": "someone"}, {})
    assert viewer.name == "someone" and not viewer.operator
    token = {"authorization": f"Bearer {auth.token}"}
    assert not auth.identify(token, {SESSION_COOKIE: auth.make_session()}).authenticated


def test_quire_reviewers_grants_the_reviewer_role_and_operators_have_it_too(tmp_path):
    auth = Authenticator(Settings(data_dir=tmp_path, operators="boss@example.com",
                                  reviewers="Ann@Example.com, boss@example.com"), databricks=True)
    ann = auth.identify({"x-forwarded-email": "ann@example.com"}, {})
    boss = auth.identify(FORGED, {})
    nobody = auth.identify({"x-forwarded-email": "vic@example.com"}, {})
    assert (ann.role, boss.role, nobody.role) == (Role.REVIEWER, Role.OPERATOR, Role.VIEWER)
    assert ann.reviewer and not ann.operator and boss.reviewer and not nobody.reviewer
    # Locally the operator token signs in the operator, who may review.
    local = Authenticator(Settings(data_dir=tmp_path, operator_token="t0ken"), databricks=False)
    assert local.identify({"authorization": "Bearer t0ken"}, {}).reviewer


def test_bearer_token_and_session_cookie(tmp_path):
    auth = Authenticator(Settings(data_dir=tmp_path, operator_token="s3cret"), databricks=False)
    assert auth.identify({"authorization": "Bearer s3cret"}, {}).operator
    assert not auth.identify({"authorization": "Bearer s3cre"}, {}).authenticated
    cookie = auth.make_session(now=1000.0)
    assert auth.read_session(cookie, now=2000.0) == "operator"
    assert auth.read_session(cookie, now=1000.0 + 8 * 86400) is None, "sessions expire"
    assert auth.read_session(cookie[:-4] + "AAAA", now=2000.0) is None
    other = Authenticator(Settings(data_dir=tmp_path, operator_token="rotated"), databricks=False)
    assert other.read_session(cookie, now=2000.0) is None, "a new token ends old sessions"


def test_generated_token_is_kept_private_and_reused(tmp_path):
    settings = Settings(data_dir=tmp_path)
    token = load_operator_token(settings)
    path = tmp_path / "operator_token"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_operator_token(settings) == token and len(token) >= 24
