"""The hostile suite's app: the same module-scoped app, with the default agent, as the e2e tests'."""

from tests.e2e.conftest import app_server  # noqa: F401  (a fixture)
