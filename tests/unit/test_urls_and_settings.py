import pytest

from optima_pipelines.db.urls import dagster_storage_url, libpq_url, masked, parse_url, sqlalchemy_url
from optima_pipelines.errors import ConfigError
from optima_pipelines.settings import load_settings


def test_password_is_masked_in_printed_url():
    out = masked("postgresql://app:s3cr3t-pw@db.example:5432/optima")
    assert "s3cr3t-pw" not in out
    assert out == "postgresql://app:***@db.example:5432/optima"


def test_dagster_url_uses_psycopg2_and_the_environment_schema():
    url = dagster_storage_url("postgresql://app:pw@db:5432/optima", "dagster_stage")
    assert url.startswith("postgresql+psycopg2://app:pw@db:5432/optima?")
    assert "search_path%3Ddagster_stage" in url or "search_path=dagster_stage" in url


def test_socket_urls_survive_conversion():
    url = "postgresql://postgres:@/optima?host=/tmp/x/pgdata"
    assert parse_url(libpq_url(url)).query["host"] == "/tmp/x/pgdata"
    assert sqlalchemy_url(url).startswith("postgresql+psycopg://")


@pytest.mark.parametrize(
    "bad, message",
    [
        ("mysql://u@h/db", "must be a postgresql:// URL"),
        ("not a url", "not a valid URL"),
        ("postgresql://u@h:5432", "names no database"),
    ],
)
def test_bad_urls_are_named(bad, message):
    with pytest.raises(ConfigError, match=message):
        parse_url(bad)


@pytest.mark.parametrize("env", ["Prod", "1dev", "stage-2", "x" * 31, "a;drop"])
def test_bad_environment_names_are_rejected(env, monkeypatch):
    monkeypatch.setenv("OPTIMA_ENV", env)
    with pytest.raises(ConfigError, match="OPTIMA_ENV"):
        load_settings()


def test_environment_selects_schemas(monkeypatch):
    monkeypatch.setenv("OPTIMA_ENV", "stage")
    s = load_settings()
    assert (s.warehouse_schema, s.dagster_schema) == ("optima_stage", "dagster_stage")


def test_bad_integer_setting_is_named(monkeypatch):
    monkeypatch.setenv("SYNC_QUEUE_CONCURRENCY", "five")
    with pytest.raises(ConfigError, match="SYNC_QUEUE_CONCURRENCY"):
        load_settings()


@pytest.mark.parametrize(
    "start, message",
    [
        ("2026-13-01", "OPTIMA_PARTITIONS_START is not a date: '2026-13-01'"),
        ("2026-02-30", "OPTIMA_PARTITIONS_START is not a date: '2026-02-30'"),
        ("2099-01-01", "OPTIMA_PARTITIONS_START 2099-01-01 is after today"),
        ("1.1.2025", "OPTIMA_PARTITIONS_START must be YYYY-MM-DD, got '1.1.2025'"),
    ],
)
def test_a_partitions_start_that_is_no_past_date_is_named(monkeypatch, start, message):
    # A month 13 passed the pattern check and broke only inside Dagster as the code location loaded.
    monkeypatch.setenv("OPTIMA_PARTITIONS_START", start)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith(message)
