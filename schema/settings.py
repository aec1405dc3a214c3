"""Settings from QUIRE_* environment variables and the optional quire.toml agent configuration."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_environment(value: Any, env: Mapping[str, str] = os.environ) -> Any:
    """A quire.toml value with each ${NAME} replaced by that environment variable (in nested tables
    and lists too), so one file serves every deployment; a missing variable is a ValueError."""
    if isinstance(value, str):
        def replace(match: re.Match) -> str:
            name = match.group(1)
            if not env.get(name):
                raise ValueError(f"${{{name}}} is used but the environment variable {name} is not set")
            return env[name]
        return _ENV_REFERENCE.sub(replace, value)
    if isinstance(value, dict):
        return {k: expand_environment(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_environment(v, env) for v in value]
    return value


class AgentConfig(BaseModel):
    """One `[agents.NAME]` table of quire.toml."""

    model_config = {"extra": "forbid"}

    max_concurrent_tasks: int | None = Field(None, gt=0)
    max_tpm: int | None = Field(None, gt=0)
    lease_seconds: int = Field(60, gt=0)
    starvation_seconds: int = Field(120, ge=0)
    executor: str = "local"
    model: str | None = None
    # Unset: the agent's token usage is recorded as unpriced, never as $0.
    price_input_per_mtok: float | None = Field(None, ge=0)
    price_output_per_mtok: float | None = Field(None, ge=0)
    settings: dict[str, Any] = Field(default_factory=dict)


class CustomerConfig(BaseModel):
    """One `[customers.NAME]` table of quire.toml."""

    model_config = {"extra": "forbid"}

    monthly_llm_budget_usd: float | None = Field(None, ge=0)
    # Beside the fair share: of each agent's running tasks, at least this many are the customer's
    # whenever it has work waiting (guaranteed share), and never more than max_tasks (burst ceiling).
    guaranteed_tasks: int | None = Field(None, ge=1, le=100_000)
    max_tasks: int | None = Field(None, ge=1, le=100_000)


# Databricks Apps sends SIGKILL 15 s after SIGTERM; the grace leaves 5 s of it for handing back
# local runs and for the web server's own stop.
DATABRICKS_APPS_GRACE_SECONDS = 10.0


def on_databricks_apps() -> bool:
    """Whether this process runs as a Databricks App (the platform sets DATABRICKS_APP_NAME)."""
    return bool(os.environ.get("DATABRICKS_APP_NAME"))


def default_grace_seconds() -> float:
    """30 s, or what fits Databricks Apps' kill window there."""
    return DATABRICKS_APPS_GRACE_SECONDS if on_databricks_apps() else 30.0


class Settings(BaseSettings):
    """Every knob Quire reads; README.md documents each one."""

    model_config = SettingsConfigDict(env_prefix="QUIRE_", extra="ignore")

    database_url: str | None = None          # any Postgres; unset: Lakebase or the embedded server
    lakebase_instance: str | None = None     # Lakebase instance: OAuth token per connection
    lakebase_host: str | None = None         # or its host (the app's database resource): instance looked up
    data_dir: Path = Path(".quire")          # embedded Postgres, uploaded files, tokens
    config: Path = Path("quire.toml")        # per-agent configuration (optional file)
    files_root: str | None = None            # uploaded files; /Volumes/... for a UC Volume
    default_agent: str = "documents"
    lease_seconds: int = Field(60, gt=0)
    backoff_base_seconds: float = Field(5.0, gt=0)
    backoff_cap_seconds: float = Field(600.0, gt=0)
    host: str = "127.0.0.1"
    # Databricks Apps tells the app its port in DATABRICKS_APP_PORT.
    port: int = Field(default_factory=lambda: int(os.environ.get("DATABRICKS_APP_PORT", 8080)), gt=0, lt=65536)
    public_url: str | None = None            # how agents reach the callback routes
    worker: str = "on"                       # "off": the app does not co-host a worker
    worker_id: str | None = None
    operators: str = ""                      # comma-separated emails (Databricks Apps)
    reviewers: str = ""                      # comma-separated emails that may review (Databricks Apps)
    review_lease_seconds: int = Field(600, gt=0)           # how long a reviewer holds a document unattended
    operator_token: str | None = None        # local operator token (generated when unset)
    callback_key: str | None = None          # shared key for executors that cannot carry secrets
    max_upload_mb: int = Field(50, gt=0)
    max_batch_files: int = Field(1000, gt=0)               # files in one upload request
    max_request_mb: int = Field(1000, gt=0)                # bytes of one upload request, all files together
    uploads_at_once: int = Field(4, gt=0)                  # upload requests served at once; more get 429
    submit_max_priority: int = Field(5, ge=0, le=9)        # highest priority a submitter who is no operator may ask
    metrics_public: bool = False                           # /metrics open to anyone (else: signed-in callers)
    compute_rate_usd_per_hour: float = Field(0.0, ge=0)
    poll_seconds: float = Field(10.0, gt=0)
    worker_concurrency: int | None = Field(None, gt=0)     # local runs per worker; unset: CPU count
    worker_claim_ahead: int = Field(2, ge=0, le=16)        # runs quicker than a claim: claim up to this x more
    # SIGTERM: time in-flight local runs get to finish; within Databricks Apps' kill window there.
    shutdown_grace_seconds: float = Field(default_factory=lambda: default_grace_seconds(), ge=0)
    agent_preload: bool = True                             # local runs forked from a loaded process
    ocr_calibration: bool = True                           # a worker times OCR and text at its first idle moment (forecasts' priors)
    sweep_seconds: float = Field(5.0, gt=0)                # how often the worker sweeps expired leases
    reconcile_seconds: float = Field(30.0, gt=0)           # how often MLflow traces are read for spend
    rollup_fold_seconds: float = Field(2.0, gt=0)          # how often the worker folds marks into the rollups
    mlflow_tracking_uri: str | None = None                 # unset: database quire_mlflow beside the queue
    warehouse_id: str | None = None                        # SQL warehouse for the billing tables
    billing_seconds: float = Field(600.0, gt=0)            # how often job runs' billing is reconciled
    billing_final_seconds: float = Field(48 * 3600.0, ge=0)     # billing unchanged this long: final
    billing_unbilled_seconds: float = Field(72 * 3600.0, ge=0)  # no billing this long: never billed
    # The workspace whose billing is read (system.billing.usage is account-wide); unset: the app's
    # DATABRICKS_WORKSPACE_ID, else asked of the workspace.
    workspace_id: str | None = None

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        # Agents run in directories of their own: a path relative to where quire started would
        # point elsewhere for them.
        return value.expanduser().resolve()

    @field_validator("shutdown_grace_seconds")
    @classmethod
    def _within_kill_window(cls, value: float) -> float:
        # Databricks Apps kills the app 15 s after SIGTERM: a longer grace would be cut short, with
        # the hand-back and the server's own stop still to come.
        return min(value, DATABRICKS_APPS_GRACE_SECONDS) if on_databricks_apps() else value

    @field_validator("worker")
    @classmethod
    def _on_off(cls, value: str) -> str:
        value = value.strip().lower()
        if value not in {"on", "off"}:
            raise ValueError("QUIRE_WORKER must be 'on' or 'off'")
        return value

    @property
    def files_path(self) -> Path:
        return Path(self.files_root) if self.files_root else self.data_dir / "files"

    @property
    def operator_emails(self) -> set[str]:
        return {e.strip().lower() for e in self.operators.split(",") if e.strip()}

    @property
    def reviewer_emails(self) -> set[str]:
        return {e.strip().lower() for e in self.reviewers.split(",") if e.strip()}

    def agent_configs(self) -> dict[str, AgentConfig]:
        """The agents of quire.toml, or one default agent when there is no file."""
        if not self.config.exists():
            return {self.default_agent: AgentConfig(lease_seconds=self.lease_seconds)}
        try:
            raw = tomllib.loads(self.config.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{self.config}: not valid TOML: {exc}") from exc
        agents = raw.get("agents", {})
        if not isinstance(agents, dict) or not agents:
            raise ValueError(f"{self.config}: expected at least one [agents.NAME] table")
        try:
            return {name: AgentConfig(**expand_environment(table)) for name, table in agents.items()}
        except ValueError as exc:  # a pydantic ValidationError is one too
            raise ValueError(f"{self.config}: invalid agent configuration:\n{exc}") from exc


    def submitters(self) -> dict[str, frozenset[str]]:
        """The `[submitters]` table of quire.toml: each email (lower case) and the customers it may
        submit for; "*" stands for any customer, and for none."""
        if not self.config.exists():
            return {}
        try:
            table = tomllib.loads(self.config.read_text()).get("submitters", {})
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{self.config}: not valid TOML: {exc}") from exc
        if not isinstance(table, dict) or not all(
                isinstance(v, list) and all(isinstance(c, str) for c in v) for v in table.values()):
            raise ValueError(f'{self.config}: [submitters] maps emails to lists of customers: "a@b.c" = ["Acme"]')
        return {email.strip().lower(): frozenset(c.strip() for c in customers) for email, customers in table.items()}

    def customer_configs(self) -> dict[str, CustomerConfig]:
        """The `[customers.NAME]` tables of quire.toml (none without the file)."""
        if not self.config.exists():
            return {}
        try:
            customers = tomllib.loads(self.config.read_text()).get("customers", {})
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{self.config}: not valid TOML: {exc}") from exc
        if not isinstance(customers, dict):
            raise ValueError(f"{self.config}: [customers] must be a table of [customers.NAME] tables")
        try:
            return {name: CustomerConfig(**table) for name, table in customers.items()}
        except (TypeError, ValidationError) as exc:
            raise ValueError(f"{self.config}: invalid customer configuration:\n{exc}") from exc


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
