"""Settings from QUIRE_* environment variables and the optional quire.toml agent configuration."""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Self

_PREFIX = "QUIRE_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
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


class SettingsError(ValueError):
    """A setting (a QUIRE_* variable, an argument, a quire.toml value) that Quire cannot use."""


@dataclass(frozen=True)
class _Spec:
    """A setting's default and bounds, as a class attribute of a Checked class (see `setting`)."""

    default: Any = None
    factory: Callable[[], Any] | None = None
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    lt: float | None = None


def setting(default: Any = None, *, factory: Callable[[], Any] | None = None, gt: float | None = None,
            ge: float | None = None, le: float | None = None, lt: float | None = None) -> Any:
    """A field of a Checked class with a default (or a factory of one) and bounds."""
    return _Spec(default, factory, gt, ge, le, lt)


_KINDS: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool, "Path": Path,
                           "dict[str, Any]": dict}
_TRUE = frozenset({"1", "true", "yes", "on", "t", "y"})
_FALSE = frozenset({"0", "false", "no", "off", "f", "n"})
_WHOLE = re.compile(r"\s*[+-]?\d+\s*")


def _convert(kind: type, value: Any, label: str) -> Any:
    """`value` (a string from the environment, or a value of code or quire.toml) as `kind`."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        word = value.strip().lower() if isinstance(value, str) else None
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise SettingsError(f"{label} must be true or false (got {value!r})")
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _WHOLE.fullmatch(value):
            return int(value)
        raise SettingsError(f"{label} must be a whole number (got {value!r})")
    if kind is float:
        number = value
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = None
        if isinstance(number, int | float) and not isinstance(number, bool) and math.isfinite(number):
            return float(number)
        raise SettingsError(f"{label} must be a number (got {value!r})")
    if kind is Path:
        if isinstance(value, str | os.PathLike):
            return Path(value)
        raise SettingsError(f"{label} must be a path (got {value!r})")
    if not isinstance(value, kind):
        raise SettingsError(f"{label} must be a {'table' if kind is dict else 'string'} (got {value!r})")
    return value


def _bounded(spec: _Spec, value: Any, label: str) -> Any:
    for bound, holds, words in ((spec.gt, lambda b: value > b, "above"), (spec.ge, lambda b: value >= b, "at least"),
                                (spec.lt, lambda b: value < b, "below"), (spec.le, lambda b: value <= b, "at most")):
        if bound is not None and not holds(bound):
            raise SettingsError(f"{label} must be {words} {bound:g} (got {value!r})")
    return value


class Checked:
    """Typed fields read from keyword arguments, each converted to its annotated type and checked
    against its bounds; an unknown name or a value out of bounds is a SettingsError that names it.

    Fields are the annotated class attributes: `name: int = setting(60, gt=0)`, or a plain default.
    """

    _fields: ClassVar[dict[str, tuple[type, bool, _Spec]]] = {}
    _where = ""  # how errors name where the values came from ("[agents.docs]"); the variables otherwise

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, tuple[type, bool, _Spec]] = {}
        for name, annotation in cls.__annotations__.items():
            if name.startswith("_"):
                continue
            optional = annotation.endswith(" | None")
            kind = _KINDS[annotation.removesuffix(" | None")]
            default = cls.__dict__.get(name)
            fields[name] = (kind, optional, default if isinstance(default, _Spec) else _Spec(default))
        cls._fields = fields

    def __init__(self, **values: Any) -> None:
        self._assign(values, {})

    @classmethod
    def of(cls, where: str, table: Any) -> Self:
        """From a quire.toml table; errors name it as `where`."""
        if not isinstance(table, dict):
            raise SettingsError(f"{where} must be a table")
        made = object.__new__(cls)
        made._where = where
        made._assign(table, {})
        return made

    def _label(self, name: str) -> str:
        return f"{self._where} {name}".strip()

    def _assign(self, given: Mapping[str, Any], found: Mapping[str, Any]) -> None:
        """Sets every field: from `given` (arguments), else `found` (e.g. the environment), else its default."""
        unknown = sorted(set(given) - set(self._fields))
        if unknown:
            where = f"{self._where}: " if self._where else ""
            raise SettingsError(f"{where}unknown setting{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(map(repr, unknown))} "
                                f"(known: {', '.join(self._fields)})")
        for name, (kind, optional, spec) in self._fields.items():
            label = self._label(name)
            if name in given:
                value = given[name]
            elif name in found:
                value = found[name]
            else:
                value = spec.factory() if spec.factory is not None else spec.default
            if value is not None or not optional:
                value = _bounded(spec, _convert(kind, value, label), label)
            setattr(self, name, value)

    def as_dict(self) -> dict[str, Any]:
        """Every field and its value."""
        return {name: getattr(self, name) for name in self._fields}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.as_dict() == self.as_dict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"


class AgentConfig(Checked):
    """One `[agents.NAME]` table of quire.toml."""

    max_concurrent_tasks: int | None = setting(None, gt=0)
    max_tpm: int | None = setting(None, gt=0)
    lease_seconds: int = setting(60, gt=0)
    starvation_seconds: int = setting(120, ge=0)
    executor: str = "local"
    model: str | None = None
    # Unset: the agent's token usage is recorded as unpriced, never as $0.
    price_input_per_mtok: float | None = setting(None, ge=0)
    price_output_per_mtok: float | None = setting(None, ge=0)
    settings: dict[str, Any] = setting(factory=dict)


class CustomerConfig(Checked):
    """One `[customers.NAME]` table of quire.toml."""

    monthly_llm_budget_usd: float | None = setting(None, ge=0)
    # Beside the fair share: of each agent's running tasks, at least this many are the customer's
    # whenever it has work waiting (guaranteed share), and never more than max_tasks (burst ceiling).
    guaranteed_tasks: int | None = setting(None, ge=1, le=100_000)
    max_tasks: int | None = setting(None, ge=1, le=100_000)


# Databricks Apps sends SIGKILL 15 s after SIGTERM; the grace leaves 5 s of it for handing back
# local runs and for the web server's own stop.
DATABRICKS_APPS_GRACE_SECONDS = 10.0


def on_databricks_apps() -> bool:
    """Whether this process runs as a Databricks App (the platform sets DATABRICKS_APP_NAME)."""
    return bool(os.environ.get("DATABRICKS_APP_NAME"))


def default_grace_seconds() -> float:
    """30 s, or what fits Databricks Apps' kill window there."""
    return DATABRICKS_APPS_GRACE_SECONDS if on_databricks_apps() else 30.0


class Settings(Checked):
    """Every knob Quire reads; README.md documents each one. Each is the keyword argument given,
    else the QUIRE_<NAME> environment variable (any case), else its default."""

    database_url: str | None = None          # any Postgres; unset: Lakebase or the embedded server
    lakebase_instance: str | None = None     # Lakebase instance: OAuth token per connection
    lakebase_host: str | None = None         # or its host (the app's database resource): instance looked up
    data_dir: Path = Path(".quire")          # embedded Postgres, uploaded files, tokens
    config: Path = Path("quire.toml")        # per-agent configuration (optional file)
    files_root: str | None = None            # uploaded files; /Volumes/... for a UC Volume
    default_agent: str = "documents"
    lease_seconds: int = setting(60, gt=0)
    backoff_base_seconds: float = setting(5.0, gt=0)
    backoff_cap_seconds: float = setting(600.0, gt=0)
    host: str = "127.0.0.1"
    # Databricks Apps tells the app its port in DATABRICKS_APP_PORT.
    port: int = setting(factory=lambda: os.environ.get("DATABRICKS_APP_PORT", "8080"), gt=0, lt=65536)
    public_url: str | None = None            # how agents reach the callback routes
    worker: str = "on"                       # "off": the app does not co-host a worker
    worker_id: str | None = None
    log_level: str = "INFO"                  # DEBUG, INFO, WARNING or ERROR: the worker's and the app's logs on stderr
    operators: str = ""                      # comma-separated emails (Databricks Apps)
    reviewers: str = ""                      # comma-separated emails that may review (Databricks Apps)
    review_lease_seconds: int = setting(600, gt=0)           # how long a reviewer holds a document unattended
    operator_token: str | None = None        # local operator token (generated when unset)
    callback_key: str | None = None          # shared key for executors that cannot carry secrets
    max_upload_mb: int = setting(50, gt=0)
    max_batch_files: int = setting(1000, gt=0)               # files in one upload request
    max_request_mb: int = setting(1000, gt=0)                # bytes of one upload request, all files together
    uploads_at_once: int = setting(4, gt=0)                  # upload requests served at once; more get 429
    submit_max_priority: int = setting(5, ge=0, le=9)        # highest priority a submitter who is no operator may ask
    metrics_public: bool = False                           # /metrics open to anyone (else: signed-in callers)
    compute_rate_usd_per_hour: float = setting(0.0, ge=0)
    poll_seconds: float = setting(10.0, gt=0)
    worker_concurrency: int | None = setting(None, gt=0)     # local runs per worker; unset: CPU count
    worker_claim_ahead: int = setting(2, ge=0, le=16)        # runs quicker than a claim: claim up to this x more
    # SIGTERM: time in-flight local runs get to finish; within Databricks Apps' kill window there.
    shutdown_grace_seconds: float = setting(factory=default_grace_seconds, ge=0)
    agent_preload: bool = True                             # local runs forked from a loaded process
    ocr_calibration: bool = True                           # a worker times OCR and text at its first idle moment (forecasts' priors)
    sweep_seconds: float = setting(5.0, gt=0)                # how often the worker sweeps expired leases
    reconcile_seconds: float = setting(30.0, gt=0)           # how often MLflow traces are read for spend
    rollup_fold_seconds: float = setting(2.0, gt=0)          # how often the worker folds marks into the rollups
    rollup_drain_fold_seconds: float = setting(10.0, ge=0)   # how long a fold may wait while a drain is under way
    mlflow_tracking_uri: str | None = None                 # unset: database quire_mlflow beside the queue
    warehouse_id: str | None = None                        # SQL warehouse for the billing tables
    billing_seconds: float = setting(600.0, gt=0)            # how often job runs' billing is reconciled
    billing_final_seconds: float = setting(48 * 3600.0, ge=0)     # billing unchanged this long: final
    billing_unbilled_seconds: float = setting(72 * 3600.0, ge=0)  # no billing this long: never billed
    # The workspace whose billing is read (system.billing.usage is account-wide); unset: the app's
    # DATABRICKS_WORKSPACE_ID, else asked of the workspace.
    workspace_id: str | None = None

    def __init__(self, **values: Any) -> None:
        self._assign(values, {key[len(_PREFIX):].lower(): value for key, value in os.environ.items()
                              if key[:len(_PREFIX)].upper() == _PREFIX})
        self._normalise()

    def _label(self, name: str) -> str:
        return _PREFIX + name.upper()

    def _normalise(self) -> None:
        # Agents run in directories of their own: a path relative to where quire started would
        # point elsewhere for them.
        self.data_dir = self.data_dir.expanduser().resolve()
        # Databricks Apps kills the app 15 s after SIGTERM: a longer grace would be cut short, with
        # the hand-back and the server's own stop still to come.
        if on_databricks_apps():
            self.shutdown_grace_seconds = min(self.shutdown_grace_seconds, DATABRICKS_APPS_GRACE_SECONDS)
        self.worker = self.worker.strip().lower()
        if self.worker not in {"on", "off"}:
            raise SettingsError(f"QUIRE_WORKER must be 'on' or 'off' (got {self.worker!r})")
        self.log_level = self.log_level.strip().upper()
        if self.log_level not in LOG_LEVELS:
            raise SettingsError(f"QUIRE_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)} (got {self.log_level!r})")

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes`, each checked as the constructor checks it; the environment is not read again."""
        copy = object.__new__(type(self))
        copy._assign({**self.as_dict(), **changes}, {})
        copy._normalise()
        return copy

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
            return {name: AgentConfig.of(f"[agents.{name}]", expand_environment(table)) for name, table in agents.items()}
        except ValueError as exc:
            raise SettingsError(f"{self.config}: invalid agent configuration: {exc}") from exc

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
            return {name: CustomerConfig.of(f"[customers.{name}]", table) for name, table in customers.items()}
        except ValueError as exc:
            raise SettingsError(f"{self.config}: invalid customer configuration: {exc}") from exc


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
