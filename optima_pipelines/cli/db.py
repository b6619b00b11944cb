"""`optima-pipelines db ...`: migrations and the database URL."""

from __future__ import annotations

import click

from optima_pipelines.db.migrate import current_revision, head_revision
from optima_pipelines.operations.runtime import open_deployment


@click.group(name="db")
def db_group() -> None:
    """The warehouse database: migrations and connection URL."""


@db_group.command("upgrade")
def upgrade_cmd() -> None:
    """Create this environment's schemas, apply every pending migration, and create (or migrate) Dagster's storage."""
    with open_deployment() as dep:
        rev = current_revision(dep.database_url, dep.schema)
        click.echo(f"{dep.schema} at revision {rev} (head {head_revision()}) on {dep.masked_url()}")
        dep.upgrade_dagster_storage()
        click.echo(f"{dep.settings.dagster_schema}: Dagster's storage ready")


@db_group.command("url")
def url_cmd() -> None:
    """Print the database URL in use, with the password masked."""
    with open_deployment(migrate=False) as dep:
        click.echo(dep.masked_url())


def register(cli: click.Group) -> None:
    cli.add_command(db_group)
