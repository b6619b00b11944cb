"""`optima-pipelines`: the deployment's command line. Every command has --help.

Commands that need the database open a Deployment (optima_pipelines.operations.runtime), which starts the
embedded PostgreSQL when OPTIMA_DATABASE_URL is unset and applies pending migrations.
Expected failures (bad URL, unreachable server, unknown cabinet, bad value) print one line
starting with "error:" and exit 1; they never print a traceback.
"""

from __future__ import annotations

import sys

import click
import psycopg

from optima_pipelines.errors import OptimaError


class OptimaGroup(click.Group):
    """A click group that turns expected errors into one clear line."""

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except OptimaError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
            click.echo(f"error: database: {first}", err=True)
            sys.exit(1)


@click.group(cls=OptimaGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Optima's WB data platform on Dagster: syncs, the РНП mart, engines.

    Configuration comes from the environment (every variable: docs/configuration.md):
    OPTIMA_DATABASE_URL (unset: an embedded PostgreSQL in OPTIMA_STATE_DIR), OPTIMA_ENV (default dev), and more.
    """


def _register() -> None:
    from optima_pipelines.cli import cabinets, db, demo, dev, landing, operations, requests, wbsim

    for module in (db, cabinets, demo, dev, landing, operations, requests, wbsim, landing):
        module.register(cli)


_register()


def main() -> None:
    from optima_pipelines import logs

    logs.install()
    cli(prog_name="optima-pipelines")
