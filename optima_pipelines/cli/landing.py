"""`optima-pipelines replay ...` and `optima-pipelines landing ...`: the raw landing of WB's answers
(docs/landing.md): rebuild a cabinet's tables from what WB said, without asking WB again."""

from __future__ import annotations

import json
from datetime import date

import click

from optima_pipelines.errors import ConfigError, InvalidInput
from optima_pipelines.landing.replay import replay
from optima_pipelines.landing.store import ALL_FEEDS, Landing, process_landing
from optima_pipelines.operations.runtime import open_deployment
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.cabinet_lock import held
from optima_pipelines.warehouse.cabinets import get_cabinet


def _day(value: str, option: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{option} {value!r} is not a date (YYYY-MM-DD)") from None


def _landing() -> Landing:
    landing = process_landing()
    if landing is None:
        raise ConfigError("the landing is off (OPTIMA_LANDING_URL=off): there is nothing to replay")
    return landing


@click.command("replay")
@click.option("--cabinet", "cabinet_id", required=True, help="Cabinet id.")
@click.option(
    "--feed",
    required=True,
    type=click.Choice([*ALL_FEEDS, "all"]),
    help="The feed whose landed answers to replay (all: every feed).",
)
@click.option("--from", "first", required=True, help="First Moscow day of landed answers (YYYY-MM-DD).")
@click.option("--to", "last", default=None, help="Last Moscow day (YYYY-MM-DD). Default: today.")
def replay_cmd(cabinet_id: str, feed: str, first: str, last: str | None) -> None:
    """Run the syncs again over the WB answers landed for CABINET on those days, in the order WB sent
    them (the same decode and merge), then recompute the cabinet's РНП days left due. Sends nothing to WB.
    Prints a JSON summary."""
    from optima_pipelines.mart.plan import MART, due_pairs
    from optima_pipelines.mart.recompute import recompute_tables
    from optima_pipelines.resources.warehouse import Warehouse

    day_from, day_to = _day(first, "--from"), _day(last, "--to") if last else today_moscow()
    if day_from > day_to:
        raise InvalidInput(f"--from {day_from} is after --to {day_to}")
    landing = _landing()
    with open_deployment() as dep:
        with dep.connect() as conn:
            get_cabinet(conn, cabinet_id)
        # The cabinet's live syncs wait while the replay merges (the cabinet gate).
        with held(dep.connect, cabinet_id, dep.settings.cabinet_lock_wait_seconds):
            report = replay(
                landing,
                dep.connect,
                cabinet_id,
                feeds=None if feed == "all" else [feed],
                first=day_from,
                last=day_to,
            )
        # What the replay's merges (or anything before them) left due of the cabinet's РНП.
        with dep.connect() as conn:
            first_day = date.fromisoformat(dep.settings.partitions_start)
            by_table = due_pairs(conn, first_day, today_moscow(), [cabinet_id]).by_table()
        pairs = by_table[MART]
        warehouse = Warehouse(database_url=dep.database_url, env=dep.settings.env)
        stats = recompute_tables(warehouse.connect, by_table) if pairs else {}
    summary = report.summary() | {
        "rnp_days_recomputed": len(pairs),
        "rnp_rows_changed": sum(s.rows_changed + s.rows_removed for s in stats.values()),
        "failed_invocations": report.failed,
    }
    click.echo(json.dumps(summary, ensure_ascii=False, indent=2, default=str))


@click.group(name="landing")
def landing_group() -> None:
    """The raw landing of WB's answers (OPTIMA_LANDING_URL)."""


@landing_group.command("flush")
def flush_cmd() -> None:
    """Publish the spools of processes that ended without publishing them. Prints the files written."""
    for path in _landing().recover():
        click.echo(path)


@landing_group.command("prune")
def prune_cmd() -> None:
    """Delete the landed days older than OPTIMA_LANDING_RETENTION_DAYS (the partition manager does it weekly)."""
    from optima_pipelines.settings import load_settings

    for path in _landing().prune(load_settings().landing_retention_days, today_moscow()):
        click.echo(path)


def register(cli: click.Group) -> None:
    cli.add_command(replay_cmd)
    cli.add_command(landing_group)
