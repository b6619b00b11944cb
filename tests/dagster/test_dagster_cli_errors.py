"""A bad request to Dagster's one-off commands (operations/dagster_cli.py): the one line that explains
each bad partition key, unknown asset or missing option, made from the exception Dagster itself raises.

Dagster's command runs in this process here, one case at a time. tests/system/test_dagster_commands.py
runs the commands as a user does, each in its own process, for one bad request of each program: that
the exception hook prints the line, with exit code 1 and no traceback."""

from __future__ import annotations

from datetime import timedelta

import pytest
from click.testing import CliRunner
from dagster._cli import cli as dagster_cli

from optima_pipelines.operations.dagster_cli import one_line
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.cabinets import add_cabinet
from optima_pipelines.warehouse.secrets import TokenCipher, load_key

FORM = "CABINET|YYYY-MM-DD"
DAY = (today_moscow() - timedelta(days=1)).isoformat()

CASES = {
    "a cabinet without its day": (["--select", "wb_orders", "--partition", "c1"], ["'c1'", FORM]),
    "an asset misspelt": (
        ["--select", "wb_order", "--partition", f"c1|{DAY}"],
        ["'wb_order'", "did you mean wb_orders"],
    ),
    "a cabinet not registered": (
        ["--select", "wb_orders", "--partition", f"nosuch|{DAY}"],
        ["cabinet 'nosuch' is not registered", "cabinets: c1", FORM],
    ),
    "a month that does not exist": (
        ["--select", "wb_orders", "--partition", "c1|2026-13-01"],
        ["'2026-13-01' is not a date", FORM],
    ),
    "a day that does not exist": (
        ["--select", "wb_orders", "--partition", f"c1|{DAY[:4]}-02-30"],
        ["is not a date", FORM],
    ),
    "no --partition": (["--select", "wb_orders"], ["--partition", FORM]),
}


@pytest.fixture
def registered(warehouse_conn, settings, dagster_instance) -> None:  # type: ignore[no-untyped-def]
    add_cabinet(warehouse_conn, TokenCipher(load_key(settings)), "c1", "C1", "a-token-no-request-uses")


@pytest.mark.parametrize("args, expected", list(CASES.values()), ids=list(CASES))
def test_a_bad_request_to_dagster_asset_materialize_is_one_line_naming_it(registered, args, expected) -> None:  # type: ignore[no-untyped-def]
    argv = ["dagster", "asset", "materialize", "-m", "optima_pipelines.definitions", *args]
    result = CliRunner().invoke(dagster_cli, argv[1:])
    assert result.exit_code != 0 and result.exception is not None, result.output
    line = one_line(result.exception, argv)
    assert line is not None, f"no line for Dagster's {type(result.exception).__name__}: {result.exception}"
    assert "\n" not in line
    for part in expected:
        assert part in line, (part, line)
