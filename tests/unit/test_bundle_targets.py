"""Each target of databricks.yml, resolved as the bundle would: app.yaml, quire.databricks.toml and
the bundle agree, nothing names a target by hand, and every permission the deployment needs is
given, by the bundle or by a step docs/DATABRICKS.md names."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from app.deploy import ROOT
from schema.settings import Settings
from worker.agent_check import config_error

BUNDLE = yaml.safe_load((ROOT / "databricks.yml").read_text())
APP_YAML = yaml.safe_load((ROOT / "app.yaml").read_text())
DOCS = (ROOT / "docs" / "DATABRICKS.md").read_text()
AGENT_SP = "11111111-2222-3333-4444-555555555555"
REFERENCE = re.compile(r"\$\{([a-z_]+(?:\.[A-Za-z0-9_]+)+)\}")


def resolve(target: str, **variables: str) -> dict[str, Any]:
    """The bundle for one target with every ${...} replaced; ids the workspace assigns read <id:...>."""
    values = {name: spec.get("default") for name, spec in BUNDLE["variables"].items()}
    values.update(variables)
    missing = [name for name, value in values.items() if value is None]
    assert not missing, f"variables without a value or default: {missing}"
    tree: Any = {k: v for k, v in BUNDLE.items() if k not in ("targets", "variables")}
    overrides = BUNDLE["targets"][target]
    for key in ("resources", "variables"):
        assert key not in overrides, f"target {target} overrides {key}: resolve it here too"

    def lookup(path: str) -> str:
        parts = path.split(".")
        if parts[0] == "var":
            return str(values[parts[1]])
        if path == "bundle.target":
            return target
        if path == "workspace.host":
            return "https://workspace.example"
        if parts[0] == "resources":
            node = tree["resources"][parts[1]][parts[2]]
            field = parts[3]
            if field in node:
                return str(node[field])
            assert field in ("id", "service_principal_client_id"), f"unknown reference ${{{path}}}"
            return f"<{field}:{parts[1]}.{parts[2]}>"
        raise AssertionError(f"unknown reference ${{{path}}}")

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            return REFERENCE.sub(lambda m: lookup(m.group(1)), node)
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    for _ in range(5):  # references to references
        tree = walk(tree)
    leftover = REFERENCE.findall(yaml.safe_dump(tree))
    assert not leftover, f"unresolved in target {target}: {leftover}"
    return tree


def app_environment(bundle: dict[str, Any]) -> dict[str, str]:
    """What Databricks Apps gives the app for app.yaml: each valueFrom resolved as documented
    (database: host, volume: path, job: id, secret: value, warehouse: id, endpoint: name, experiment: id)."""
    resources = {r["name"]: r for r in bundle["resources"]["apps"]["quire"]["resources"]}
    env = {}
    for entry in APP_YAML["env"]:
        if "value" in entry:
            env[entry["name"]] = entry["value"]
            continue
        resource = resources[entry["valueFrom"]]  # every valueFrom names a resource of the app
        if "database" in resource:
            value = f"{resource['database']['instance_name']}.database.example"
        elif "uc_securable" in resource:
            assert resource["uc_securable"]["securable_type"] == "VOLUME"
            value = "/Volumes/" + resource["uc_securable"]["securable_full_name"].replace(".", "/")
        elif "job" in resource:
            value = resource["job"]["id"]
        elif "secret" in resource:
            value = "the-shared-callback-key"
        elif "sql_warehouse" in resource:
            value = resource["sql_warehouse"]["id"]
        elif "serving_endpoint" in resource:
            value = resource["serving_endpoint"]["name"]
        elif "experiment" in resource:
            value = resource["experiment"]["experiment_id"]
        else:
            raise AssertionError(f"valueFrom {entry['valueFrom']}: a resource type this test does not know")
        env[entry["name"]] = value
    return env


TARGETS = sorted(BUNDLE["targets"])


@pytest.mark.parametrize("target", TARGETS)
def test_app_yaml_and_the_toml_take_every_value_from_the_target(target, monkeypatch):
    bundle = resolve(target, warehouse_id="wh-1", agent_principal=AGENT_SP)
    res = bundle["resources"]
    env = app_environment(bundle)
    # Nothing in app.yaml names a target's resource by hand: such values come by valueFrom.
    names = {res["database_instances"]["quire_db"]["name"], res["secret_scopes"]["quire"]["name"],
             res["jobs"]["agent"]["name"], res["experiments"]["traces"]["name"], "/Volumes/"}
    for entry in APP_YAML["env"]:
        assert not any(n in str(entry.get("value", "")) for n in names), entry
    volume = res["volumes"]["documents"]
    assert env["QUIRE_FILES_ROOT"] == f"/Volumes/{volume['catalog_name']}/{volume['schema_name']}/{volume['name']}"
    assert env["QUIRE_LAKEBASE_HOST"].startswith(res["database_instances"]["quire_db"]["name"] + ".")
    assert env["QUIRE_AGENT_JOB_ID"] == "<id:jobs.agent>"
    assert env["MLFLOW_EXPERIMENT_ID"] == "<id:experiments.traces>"
    # The toml, read with that environment: every agent runs this target's job on its endpoint.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    agents = Settings(config=ROOT / "quire.databricks.toml").agent_configs()
    assert agents
    for agent in agents.values():
        assert agent.executor == "databricks"
        assert agent.model == BUNDLE["variables"]["serving_endpoint"]["default"]
        assert agent.price_input_per_mtok is not None and agent.price_output_per_mtok is not None

        class Row:
            executor, model, settings = agent.executor, agent.model, agent.settings

        assert config_error(Row(), env={**env, "QUIRE_AGENT_JOB_ID": "123"}) is None


@pytest.mark.parametrize("target", TARGETS)
def test_the_job_reads_what_the_app_shares_and_traces_to_an_absolute_experiment(target):
    bundle = resolve(target, warehouse_id="wh-1", agent_principal=AGENT_SP)
    res = bundle["resources"]
    job = res["jobs"]["agent"]
    [task] = job["tasks"]
    flags = dict(p[2:].split("=", 1) for p in task["python_wheel_task"]["parameters"] if p.startswith("--"))
    app_resources = {r["name"]: r for r in res["apps"]["quire"]["resources"]}
    # The same key signs the callbacks on both sides; the job's own OAuth client lives in that scope.
    assert flags["callback-key-scope"] == app_resources["callback-key"]["secret"]["scope"]
    assert flags["callback-key-name"] == app_resources["callback-key"]["secret"]["key"]
    assert {"oauth-client-id-key", "oauth-client-secret-key"} <= set(flags)
    assert not any("client-secret=" in p and "key" not in p for p in task["python_wheel_task"]["parameters"])
    # MLflow on Databricks refuses relative experiment names.
    assert flags["mlflow-experiment"] == res["experiments"]["traces"]["name"]
    assert flags["mlflow-experiment"].startswith("/")
    assert app_resources["traces"]["experiment"]["experiment_id"] == "<id:experiments.traces>"
    assert flags["workspace-host"].startswith("https://")
    # environment_version replaces the deprecated client.
    [environment] = job["environments"]
    assert "client" not in environment["spec"] and environment["spec"]["environment_version"]
    assert app_resources["agent-job"]["job"]["id"] == "<id:jobs.agent>"


def grants_of(bundle: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(principal, privilege, securable) for every permission the resolved bundle gives."""
    res = bundle["resources"]
    given: set[tuple[str, str, str]] = set()
    app_sp = "<app>"
    schema = res["schemas"]["quire"]
    for grant in schema.get("grants", []):
        for privilege in grant["privileges"]:
            given.add((grant["principal"], privilege, f"schema {schema['catalog_name']}.{schema['name']}"))
    volume = res["volumes"]["documents"]
    volume_name = f"{volume['catalog_name']}.{volume['schema_name']}.{volume['name']}"
    for grant in volume.get("grants", []):
        for privilege in grant["privileges"]:
            given.add((grant["principal"], privilege, f"volume {volume_name}"))
    for kind, key, what in (("secret_scopes", "quire", "scope"), ("experiments", "traces", "experiment"),
                            ("apps", "quire", "app")):
        for permission in res[kind][key].get("permissions", []):
            who = permission.get("service_principal_name") or permission.get("user_name")
            given.add((who, permission["level"], what))
    given.add((res["jobs"]["agent"]["run_as"]["service_principal_name"], "RUN_AS", "job"))
    for resource in res["apps"]["quire"]["resources"]:
        [(kind, spec)] = [(k, v) for k, v in resource.items() if k != "name"]
        if kind == "uc_securable":
            target = spec["securable_full_name"]
            given.add((app_sp, spec["permission"], f"{spec['securable_type'].lower()} {target}"))
            # An app's Unity Catalog resource also grants USE CATALOG and USE SCHEMA on its parents.
            catalog, schema_name = target.split(".")[:2]
            given.add((app_sp, "USE_CATALOG", f"catalog {catalog}"))
            given.add((app_sp, "USE_SCHEMA", f"schema {catalog}.{schema_name}"))
        else:
            given.add((app_sp, spec["permission"], kind))
    return given


def needed(target: str) -> list[tuple[str, str, str]]:
    """Every permission the deployment needs: (who, privilege, on what); `agent` is the job's principal."""
    schema, volume = f"main.quire_{target}", f"main.quire_{target}.documents"
    return [
        ("agent", "USE_CATALOG", "catalog main"),
        ("agent", "USE_SCHEMA", f"schema {schema}"),
        ("agent", "READ_VOLUME", f"volume {volume}"),
        ("agent", "WRITE_VOLUME", f"volume {volume}"),
        ("agent", "READ", "scope"),
        ("agent", "CAN_USE", "app"),
        ("agent", "CAN_EDIT", "experiment"),
        ("agent", "CAN_QUERY", "serving endpoint"),
        ("agent", "RUN_AS", "job"),
        ("<app>", "CAN_CONNECT_AND_CREATE", "database"),
        ("<app>", "CAN_MANAGE_RUN", "job"),
        ("<app>", "READ", "secret"),
        ("<app>", "CAN_USE", "sql_warehouse"),
        ("<app>", "USE_CATALOG", "catalog main"),
        ("<app>", "USE_SCHEMA", f"schema {schema}"),
        ("<app>", "WRITE_VOLUME", f"volume {volume}"),
        ("<app>", "USE_CATALOG", "catalog system"),
        ("<app>", "USE_SCHEMA", "schema system.billing"),
        ("<app>", "SELECT", "table system.billing.usage"),
        ("<app>", "SELECT", "table system.billing.list_prices"),
        ("<app>", "CAN_READ", "experiment"),
    ]


def documented_by_hand(target: str) -> set[tuple[str, str, str]]:
    """The grants docs/DATABRICKS.md's table says are given by hand: `| agent job | PRIV | on | by hand ...|`."""
    rows = re.findall(r"^\| (agent job|app) \| `([A-Z_]+)` \| ([^|]+?) \| by hand", DOCS, re.MULTILINE)
    return {("agent" if who == "agent job" else "<app>", privilege,
             on.replace("`", "").replace("<target>", target).strip()) for who, privilege, on in rows}


@pytest.mark.parametrize("target", TARGETS)
def test_the_grants_cover_every_permission_needed(target):
    bundle = resolve(target, warehouse_id="wh-1", agent_principal=AGENT_SP)
    given = {("agent" if who == AGENT_SP else who, privilege, on) for who, privilege, on in grants_of(bundle)}
    by_hand = documented_by_hand(target)
    missing = [need for need in needed(target) if need not in given and need not in by_hand]
    assert not missing, f"given neither by the bundle nor by a documented step: {missing}"
    # What the docs say is done by hand is really not in the bundle (else the table is stale).
    assert by_hand and not (by_hand & given)
    # Every grant in the docs' table is one the deployment needs.
    documented = re.findall(r"^\| (?:agent job|app) \| `([A-Z_]+)` \|", DOCS, re.MULTILINE)
    assert set(documented) <= {privilege for _, privilege, _ in needed(target)}
