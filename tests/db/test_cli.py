"""The CLI as a user runs it: a real process, real PostgreSQL, one-line errors."""

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzIjozMjc2OCwic2lkIjoiY2xpIn0.c2ln"


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "optima_pipelines.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=stdin,
        timeout=120,
    )


def test_cabinet_lifecycle_never_prints_the_token(optima_env, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    added = run_cli("cabinets", "add", "c-1", "--name", "Cabinet 1", "--token-file", str(token_file))
    assert added.returncode == 0, added.stderr
    listed = run_cli("cabinets", "list")
    assert "c-1" in listed.stdout and "token set" in listed.stdout
    status = run_cli("cabinets", "set-status", "c-1", "paused")
    assert "now paused" in status.stdout
    for out in (added, listed, status):
        assert TOKEN not in out.stdout + out.stderr


@pytest.mark.parametrize(
    "args, env, expected",
    [
        (("cabinets", "set-status", "ghost", "active"), {}, "error: cabinet 'ghost' does not exist"),
        (("cabinets", "set-status", "ghost", "sleeping"), {}, "error: invalid status 'sleeping'"),
        (
            ("db", "upgrade"),
            {"OPTIMA_DATABASE_URL": "postgresql://u@127.0.0.1:1/x"},
            "error: cannot connect to PostgreSQL at 127.0.0.1:1/x",
        ),
        (
            ("db", "upgrade"),
            {"OPTIMA_DATABASE_URL": "mysql://u@h/db"},
            "error: OPTIMA_DATABASE_URL must be a postgresql:// URL",
        ),
        (("cabinets", "add", "bad|id"), {}, "error: invalid cabinet id 'bad|id'"),
        (
            ("cabinets", "add", "c2", "--token-env", "NOT_SET_ANYWHERE"),
            {},
            "error: environment variable NOT_SET_ANYWHERE is not set",
        ),
    ],
)
def test_expected_failures_are_one_line_without_traceback(optima_env, args, env, expected):
    result = run_cli(*args, env=env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(expected), result.stderr
    assert "Traceback" not in result.stderr


def test_db_url_masks_the_password(optima_env):
    result = run_cli("db", "url", env={"OPTIMA_DATABASE_URL": "postgresql://app:hunter2@127.0.0.1:1/x"})
    assert result.returncode == 0
    assert "hunter2" not in result.stdout and "***" in result.stdout


def test_every_command_has_help(optima_env):
    from optima_pipelines.cli import cli

    def walk(group, path):
        yield path
        for name, cmd in getattr(group, "commands", {}).items():
            yield from walk(cmd, [*path, name])

    # In process (a process per command cost 14 s), except `dagster`, which hands over to Dagster's
    # own CLI in a process of its own.
    runner = CliRunner()
    for path in walk(cli, []):
        if path == ["dagster"]:
            ran = run_cli("dagster", "--help")
            code, output = ran.returncode, ran.stdout + ran.stderr
        else:
            result = runner.invoke(cli, [*path, "--help"])
            code, output = result.exit_code, result.output
        assert code == 0, (path, output)
        assert "Usage:" in output, path
