"""The deployment files say what the code does: commands that exist, and the same queue rules everywhere."""

import configparser
import shlex
from pathlib import Path

import click
import pytest
import yaml

from optima_pipelines.cli import cli

TOP = Path(__file__).resolve().parents[2]
DEPLOY = TOP / "deploy"


def parse_invocation(argv: list[str]) -> click.Command:
    """Resolve `optima-pipelines ARGS` to its command and parse its options (without running it)."""
    assert Path(argv[0]).name == "optima-pipelines", argv
    command: click.Command = cli
    args = argv[1:]
    while isinstance(command, click.Group):
        name, args = args[0], args[1:]
        sub = command.get_command(click.Context(command), name)
        assert sub is not None, f"no command {name!r} in {argv}"
        command = sub
    if command.name != "dagster":  # passes its arguments through to Dagster's own CLI
        command.make_context(command.name or "", list(args))
    return command


def procfile() -> dict[str, list[str]]:
    lines = [line for line in (DEPLOY / "Procfile").read_text().splitlines() if line and not line.startswith("#")]
    return {name: shlex.split(cmd) for name, cmd in (line.split(":", 1) for line in lines)}


def units() -> dict[str, configparser.ConfigParser]:
    parsed = {}
    for path in sorted((DEPLOY / "systemd").glob("*.service")):
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.optionxform = str  # type: ignore[assignment]
        parser.read_string(path.read_text())
        parsed[path.stem] = parser
    return parsed


def test_procfile_runs_existing_commands():
    processes = procfile()
    # The run worker is part of every deployment: the warm run workers are the default launcher.
    assert set(processes) == {"code-server", "daemon", "webserver", "metrics", "run-worker"}
    for argv in processes.values():
        parse_invocation(argv)


@pytest.mark.parametrize(
    "name",
    [
        "optima-migrate",
        "optima-code-server",
        "optima-daemon",
        "optima-webserver",
        "optima-metrics",
        "optima-run-worker@",
    ],
)
def test_systemd_units_run_existing_commands_with_the_env_file(name):
    unit = units()[name]
    exec_starts = [
        line
        for line in (DEPLOY / "systemd" / f"{name}.service").read_text().splitlines()
        if line.startswith("ExecStart=")
    ]
    assert exec_starts
    for line in exec_starts:
        parse_invocation(shlex.split(line.removeprefix("ExecStart=")))
    assert unit["Service"]["EnvironmentFile"] == "/etc/optima/optima.env"


def test_the_env_example_sets_only_known_variables():
    from optima_pipelines.settings import ENVIRONMENT_VARIABLES

    names = [
        line.split("=", 1)[0]
        for line in (DEPLOY / "optima.env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    ]
    assert names and set(names) <= set(ENVIRONMENT_VARIABLES)


def test_kubernetes_values_keep_the_queue_rules_of_dagster_yaml():
    local = yaml.safe_load((TOP / "dagster.yaml").read_text())
    values = yaml.safe_load((DEPLOY / "k8s" / "values.yaml").read_text())
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["type"] == "CustomRunCoordinator"
    custom = coordinator["config"]["customRunCoordinator"]
    assert (custom["module"], custom["class"]) == (
        local["run_coordinator"]["module"],
        local["run_coordinator"]["class"],
    )
    assert custom["config"]["tag_concurrency_limits"] == local["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["dagsterDaemon"]["runMonitoring"]["enabled"] is True
    assert values["pythonLogs"]["managedPythonLoggers"] == local["python_logs"]["managed_python_loggers"]
    sensor = values["retention"]["sensor"]["purgeAfterDays"]
    assert {k: sensor[k] for k in local["retention"]["sensor"]["purge_after_days"]} == local["retention"]["sensor"][
        "purge_after_days"
    ]
    assert values["retention"]["schedule"]["purgeAfterDays"] == local["retention"]["schedule"]["purge_after_days"]
    # External PostgreSQL, through psycopg2 (DESIGN.md §4.2), Dagster's storage in its own schema.
    assert values["postgresql"]["enabled"] is False
    assert values["postgresql"]["postgresqlScheme"] == "postgresql+psycopg2"
    # The location keeps the name the code and the tests use.
    assert values["dagsterWebserver"]["workspace"]["servers"][0]["name"] == "optima_pipelines"
    assert "--location-name" in values["dagster-user-deployments"]["deployments"][0]["codeServerArgs"]
