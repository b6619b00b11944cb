"""`optima-pipelines request ...`: ask for work the way the backend does (a row in the requests table)."""

from __future__ import annotations

import json

import click

from optima_pipelines.operations.runtime import open_deployment
from optima_pipelines.sync.digitization import check_date_from
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.warehouse.cabinets import get_cabinet


@click.group(name="request")
def request_group() -> None:
    """Request work (user imports, on-demand syncs); the requests sensor launches a run within seconds."""


@request_group.command("import-feeds")
@click.option("--cabinet", "cabinet_id", required=True, help="Cabinet id.")
@click.option("--date-from", required=True, help="First Moscow day to reload (YYYY-MM-DD), at most 90 days back.")
def import_feeds_cmd(cabinet_id: str, date_from: str) -> None:
    """Reload a cabinet's orders and sales from DATE_FROM to today (kind import-user-feeds). Prints the request id."""
    check_date_from(date_from, today_moscow())  # the sensor's rule: a bad date is refused here, not later
    with open_deployment() as dep, dep.connect() as conn:
        get_cabinet(conn, cabinet_id)
        request_id = outbox.create_request(conn, outbox.IMPORT_FEEDS, cabinet_id, {"dateFrom": date_from})
        conn.commit()
    click.echo(request_id)


@request_group.command("show")
@click.argument("request_id", type=int)
def show_cmd(request_id: int) -> None:
    """Show a request: kind, cabinet, status, run id, error and result."""
    with open_deployment() as dep, dep.connect() as conn:
        req = outbox.get_request(conn, request_id)
    click.echo(
        json.dumps(
            {
                "id": req.id,
                "kind": req.kind,
                "cabinet": req.cabinet_id,
                "payload": req.payload,
                "status": req.status,
                "run_id": req.run_id,
                "error": req.error,
                "result": req.result,
            },
            ensure_ascii=False,
            indent=2,
            default=str,
        )
    )


def register(cli: click.Group) -> None:
    cli.add_command(request_group)
