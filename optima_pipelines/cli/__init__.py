"""`optima-pipelines`: the deployment's command line. Every command has --help.

Commands that need the database open a Deployment (optima_pipelines.operations.runtime), which starts the
embedded PostgreSQL when OPTIMA_DATABASE_URL is unset and applies pending migrations.
Expected failures (bad URL, unreachable server, unknown cabinet, bad value) print one line
starting with "error:" and exit 1; they never print a traceback.
"""

from __future__ import annotations

import errno
import sys

import click
import psycopg

from optima_pipelines.errors import OptimaError

#: PostgreSQL's SQLSTATE for a full disk.
DISK_FULL = "53100"


def disk_full(exc: BaseException) -> str | None:
    """The one line to print when ``exc`` (or what caused it) is a full disk, naming where; else None.
    A full disk surfaces as an OSError (a file the CLI writes), PostgreSQL's disk_full (psycopg, or
    Dagster's storage through SQLAlchemy and psycopg2), each deep in a chain whose last line hides it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            where = current.filename or _state_dir()
            return f"no space left on device: cannot write {where}; free space there and run the command again"
        sqlstate = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        text = str(current)
        if sqlstate == DISK_FULL or "No space left on device" in text:
            first = (text.strip().splitlines() or [current.__class__.__name__])[0]
            return (
                f"no space left on device: the database server cannot write ({first}); free space on the "
                "database server's disk and run the command again"
            )
        current = current.__cause__ or current.__context__ or getattr(current, "orig", None)
    return None


def _state_dir() -> str:
    try:
        from optima_pipelines.settings import load_settings

        return f"in the state folder {load_settings().state_dir}"
    except OptimaError:
        return "a file"


class OptimaGroup(click.Group):
    """A click group that turns expected errors into one clear line."""

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except OptimaError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        except psycopg.Error as exc:
            full = disk_full(exc)
            first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
            click.echo(f"error: {full}" if full else f"error: database: {first}", err=True)
            sys.exit(1)
        except Exception as exc:
            full = disk_full(exc)
            if full is None:
                raise
            click.echo(f"error: {full}", err=True)
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
