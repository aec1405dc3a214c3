"""Settings: defaults, validation, the agent configuration file."""

from pathlib import Path

import pytest

from schema.settings import Settings, SettingsError


def test_a_relative_data_dir_is_made_absolute_from_where_quire_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Settings(data_dir=Path(".quire")).data_dir == tmp_path / ".quire"
    assert Settings(data_dir=Path(".quire")).files_path == tmp_path / ".quire" / "files"


def test_worker_switch_accepts_only_on_or_off():
    assert Settings(worker=" OFF ").worker == "off"
    with pytest.raises(SettingsError, match="QUIRE_WORKER"):
        Settings(worker="maybe")


def test_the_log_level_is_a_level_name_and_a_wrong_one_is_named():
    assert Settings().log_level == "INFO"
    assert Settings(log_level=" warning ").log_level == "WARNING"
    with pytest.raises(SettingsError, match="QUIRE_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR"):
        Settings(log_level="quiet")


def test_without_a_config_file_there_is_one_default_agent(tmp_path):
    agents = Settings(config=tmp_path / "missing.toml", default_agent="docs", lease_seconds=90).agent_configs()
    assert list(agents) == ["docs"] and agents["docs"].lease_seconds == 90


def test_config_file_errors_name_the_file_and_the_problem(tmp_path):
    config = tmp_path / "quire.toml"
    config.write_text("[agents.invoices\n")
    with pytest.raises(ValueError, match="not valid TOML"):
        Settings(config=config).agent_configs()
    config.write_text("[agents.invoices]\nmax_concurrent = 3\n")
    with pytest.raises(ValueError, match="max_concurrent"):
        Settings(config=config).agent_configs()
    config.write_text("title = 'no agents'\n")
    with pytest.raises(ValueError, match="at least one"):
        Settings(config=config).agent_configs()


def test_customer_budgets_come_from_the_config_file(tmp_path):
    config = tmp_path / "quire.toml"
    assert Settings(config=config).customer_configs() == {}
    config.write_text("[agents.docs]\n[customers.acme]\nmonthly_llm_budget_usd = 100\n[customers.globex]\n")
    budgets = Settings(config=config).customer_configs()
    assert budgets["acme"].monthly_llm_budget_usd == 100 and budgets["globex"].monthly_llm_budget_usd is None
    config.write_text("[agents.docs]\n[customers.acme]\nmonthly_llm_budget_usd = -5\n")
    with pytest.raises(ValueError, match="invalid customer configuration"):
        Settings(config=config).customer_configs()
    config.write_text("[agents.docs]\n[customers.acme]\nbudget = 5\n")
    with pytest.raises(ValueError, match="budget"):
        Settings(config=config).customer_configs()


def test_the_shutdown_grace_fits_the_kill_window_of_databricks_apps(monkeypatch):
    monkeypatch.delenv("QUIRE_SHUTDOWN_GRACE_SECONDS", raising=False)
    monkeypatch.delenv("DATABRICKS_APP_NAME", raising=False)
    assert Settings().shutdown_grace_seconds == 30.0
    assert Settings(shutdown_grace_seconds=45).shutdown_grace_seconds == 45.0
    # Databricks Apps kills the app 15 s after SIGTERM: the grace leaves room for the rest of the stop.
    monkeypatch.setenv("DATABRICKS_APP_NAME", "quire")
    assert Settings().shutdown_grace_seconds == 10.0
    assert Settings(shutdown_grace_seconds=30).shutdown_grace_seconds == 10.0
    assert Settings(shutdown_grace_seconds=4).shutdown_grace_seconds == 4.0


def test_config_values_may_name_environment_variables(tmp_path, monkeypatch):
    config = tmp_path / "quire.toml"
    config.write_text('[agents.a]\nexecutor = "databricks"\nmodel = "${QUIRE_SERVING_ENDPOINT}"\n'
                      'settings = { extractor = "llm", note = "on ${QUIRE_SERVING_ENDPOINT} only" }\n')
    monkeypatch.setenv("QUIRE_SERVING_ENDPOINT", "databricks-claude-sonnet-4")
    agent = Settings(config=config).agent_configs()["a"]
    assert agent.model == "databricks-claude-sonnet-4"
    assert agent.settings["note"] == "on databricks-claude-sonnet-4 only"
    monkeypatch.delenv("QUIRE_SERVING_ENDPOINT")
    with pytest.raises(ValueError, match=r"(?s)quire.toml.*QUIRE_SERVING_ENDPOINT is not set"):
        Settings(config=config).agent_configs()


def test_environment_values_are_read_as_their_types_and_bad_ones_are_named(monkeypatch):
    monkeypatch.setenv("QUIRE_LEASE_SECONDS", " 90 ")
    monkeypatch.setenv("quire_metrics_public", "Yes")
    monkeypatch.setenv("QUIRE_POLL_SECONDS", "2.5")
    monkeypatch.setenv("QUIRE_WORKER_CONCURRENCY", "8")
    monkeypatch.setenv("QUIRE_DATA_DIR", "/tmp/quire-settings")
    settings = Settings()
    assert (settings.lease_seconds, settings.metrics_public, settings.poll_seconds) == (90, True, 2.5)
    assert settings.worker_concurrency == 8 and settings.data_dir == Path("/tmp/quire-settings")
    assert Settings(lease_seconds=30).lease_seconds == 30  # an argument wins over the environment
    for name, value, words in [("QUIRE_LEASE_SECONDS", "1.5", "a whole number"), ("QUIRE_LEASE_SECONDS", "0", "above 0"),
                               ("QUIRE_METRICS_PUBLIC", "perhaps", "true or false"),
                               ("QUIRE_POLL_SECONDS", "nan", "a number"), ("QUIRE_PORT", "70000", "below 65536"),
                               ("QUIRE_SUBMIT_MAX_PRIORITY", "10", "at most 9")]:
        monkeypatch.setenv(name, value)
        with pytest.raises(SettingsError, match=f"{name} must be {words}"):
            Settings()
        monkeypatch.delenv(name)
    with pytest.raises(SettingsError, match="unknown setting 'lease'"):
        Settings(lease=3)


def test_a_copy_with_changes_is_checked_and_does_not_read_the_environment_again(monkeypatch):
    settings = Settings(worker="on", lease_seconds=45)
    monkeypatch.setenv("QUIRE_LEASE_SECONDS", "99")
    copy = settings.replace(worker=" OFF ")
    assert (copy.worker, copy.lease_seconds, settings.worker) == ("off", 45, "on")
    with pytest.raises(SettingsError, match="QUIRE_LEASE_SECONDS must be above 0"):
        settings.replace(lease_seconds=-1)


@pytest.mark.parametrize(("toml", "error"), [
    ('[agents.a]\nmax_tpm = 0\n', r"\[agents.a\] max_tpm must be above 0"),
    ('[agents.a]\nlease_seconds = "soon"\n', r"\[agents.a\] lease_seconds must be a whole number"),
    ('[agents.a]\nsettings = "x"\n', r"\[agents.a\] settings must be a table"),
    ('agents = { a = 3 }\n', r"\[agents.a\] must be a table"),
])
def test_agent_tables_are_checked_field_by_field(tmp_path, toml, error):
    config = tmp_path / "quire.toml"
    config.write_text(toml)
    with pytest.raises(SettingsError, match=error):
        Settings(config=config).agent_configs()


def test_agent_table_values_are_read_as_their_types(tmp_path):
    config = tmp_path / "quire.toml"
    config.write_text('[agents.a]\nmax_concurrent_tasks = 4.0\nprice_input_per_mtok = 3\nsettings = { k = 1 }\n')
    agent = Settings(config=config).agent_configs()["a"]
    assert agent.as_dict() == {"max_concurrent_tasks": 4, "max_tpm": None, "lease_seconds": 60,
                               "starvation_seconds": 120, "executor": "local", "model": None,
                               "price_input_per_mtok": 3.0, "price_output_per_mtok": None, "settings": {"k": 1}}
