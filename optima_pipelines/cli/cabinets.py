"""`optima-pipelines cabinets ...`: register cabinets, list them, change their status."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from optima_pipelines import cabinets as repo
from optima_pipelines.errors import InvalidInput
from optima_pipelines.runtime import open_deployment


def _read_token(token: str | None, token_file: Path | None, token_env: str | None) -> str | None:
    given = [x for x in (token, token_file, token_env) if x is not None]
    if len(given) > 1:
        raise InvalidInput("give the token once: --token, --token-file or --token-env")
    if token == "-":
        return sys.stdin.readline().strip()
    if token is not None:
        return token
    if token_file is not None:
        try:
            return token_file.read_text().strip()
        except OSError as exc:
            raise InvalidInput(f"cannot read token file {token_file}: {exc.strerror}") from None
    if token_env is not None:
        value = os.environ.get(token_env)
        if not value:
            raise InvalidInput(f"environment variable {token_env} is not set")
        return value.strip()
    return None


@click.group(name="cabinets")
def cabinets_group() -> None:
    """Seller cabinets (WB accounts): the unit every sync fans out over."""


@cabinets_group.command("add")
@click.argument("cabinet_id")
@click.option("--name", help="Display name (default: the id).")
@click.option("--token", help="WB API token; '-' reads it from stdin. Prefer --token-file or --token-env.")
@click.option("--token-file", type=click.Path(path_type=Path), help="File holding the WB API token.")
@click.option("--token-env", help="Environment variable holding the WB API token.")
@click.option("--status", default="active", show_default=True, type=click.Choice(repo.STATUSES))
def add_cmd(
    cabinet_id: str, name: str | None, token: str | None, token_file: Path | None, token_env: str | None, status: str
) -> None:
    """Register a cabinet. The token is stored encrypted and never printed."""
    secret = _read_token(token, token_file, token_env)
    with open_deployment() as dep, dep.connect() as conn:
        cab = repo.add_cabinet(conn, dep.cipher(), cabinet_id, name or cabinet_id, secret, status)
        conn.commit()
    click.echo(f"added cabinet {cab.id} ({cab.status}, token {'set' if cab.has_token else 'not set'})")


@cabinets_group.command("set-token")
@click.argument("cabinet_id")
@click.option("--token", help="WB API token; '-' reads it from stdin.")
@click.option("--token-file", type=click.Path(path_type=Path))
@click.option("--token-env")
def set_token_cmd(cabinet_id: str, token: str | None, token_file: Path | None, token_env: str | None) -> None:
    """Replace a cabinet's WB token."""
    secret = _read_token(token, token_file, token_env)
    if secret is None:
        raise InvalidInput("give the token with --token, --token-file or --token-env")
    with open_deployment() as dep, dep.connect() as conn:
        repo.set_token(conn, dep.cipher(), cabinet_id, secret)
        conn.commit()
    click.echo(f"token of cabinet {cabinet_id} replaced")


@cabinets_group.command("list")
def list_cmd() -> None:
    """List cabinets with their status (tokens are never shown)."""
    with open_deployment() as dep, dep.connect() as conn:
        rows = repo.list_cabinets(conn)
    if not rows:
        click.echo("no cabinets")
        return
    width = max(len(c.id) for c in rows)
    for c in rows:
        click.echo(f"{c.id:<{width}}  {c.status:<13}  token {'set' if c.has_token else 'missing':<7}  {c.name}")


@cabinets_group.command("set-status")
@click.argument("cabinet_id")
@click.argument("status")
def set_status_cmd(cabinet_id: str, status: str) -> None:
    """Change a cabinet's status: active, paused, token_invalid or archived. Only active cabinets are synced."""
    with open_deployment() as dep, dep.connect() as conn:
        cab = repo.set_status(conn, cabinet_id, status)
        conn.commit()
    click.echo(f"cabinet {cab.id} is now {cab.status}")


def register(cli: click.Group) -> None:
    cli.add_command(cabinets_group)
